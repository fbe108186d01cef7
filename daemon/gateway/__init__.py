"""gateway: the host side of the guest protocol, and every token a model spends.

Owns: the guest protocol's host framing and version (``guest_protocol``), one run's gateway
socket and session (``session``), the handler contract a run's session serves
(``handler``), the TCP+TLS front remote units reach it by (``front``, ``tls``), the
transcript, metered model calls (``metering``), budgets (``budget``) and the ``ledger``
table (``ledger`` is its only writer and reader).

May import: config, providers (the chat contract), store, tasks, errors, ``sandbox.unix`` (the
socket both sides of a run use). Never suites,
evaluation or anything above.
"""
