"""live: the live harness that serves ``ask`` and ``run`` requests, swapping versions
without dropping any, and the ``requests`` table that records each request.

May import: evaluation (to run one task), lineage (the ``current`` pointer), suites, tasks.
"""
