"""Generated tasks: made per installation (and per epoch) from its secret, so no harness can
know them in advance (the held-out evidence a memorised table cannot reach).

Each module makes one kind of task as a pure function of ``(seed, index)``, with its ground
truth by construction, checked by the same checker as the public suite it stands beside.

Owns: the generators and their vocabularies.

May import: the standard library, ``daemon.tasks``, ``daemon.providers.base`` (messages,
tools) and the public suites' checkers and data types in ``daemon.suites``.
"""
