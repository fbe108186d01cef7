"""live: the live harness that serves ``ask`` and ``run`` requests, swapping versions
without dropping any.

Owns: the live harness (``harness``: each request on the version live when it arrived, a
promotion or rollback swapping versions without dropping one), the ``requests`` table
that records each served request (``requests``) and labelling a served request as a task
of a private suite (``private_suites``).

May import: evaluation (to run one task), lineage (the ``current`` pointer), suites (task
references, the task-file format), providers.base (messages), config.policy (the policy a
request is served under), store, tasks, errors.
Never improve or control.
"""
