"""gateway: the host side of the guest protocol, and every token a model spends.

Owns: the guest protocol's host framing and version (``wire``), one run's gateway socket and
session (``session``, ``unix``), the transcript, metered model calls (``metering``), budgets
(``budget``) and the ``ledger`` table (``ledger`` is its only writer and reader).

May import: config, providers (the chat contract), store, tasks, errors. Never suites,
evaluation or anything above.
"""
