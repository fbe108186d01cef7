"""harnessd: a daemon that keeps a live agent harness and lets it improve itself safely.

Owns (the top-level modules): the service, one task group running every component
(``service``), the ``harnessd`` entry point (``cli``), the SQLite store and its schema
(``store``), events (``events``), the error root (``errors``), the task and verdict
contracts (``tasks``, ``verdict``), bounded JSON-lines framing (``jsonlines``), Python
parsing one thread at a time (``pyast``) and the import-name guard (``_guard``).

May import: ``service`` and ``cli`` wire every component together and import them all; the
contracts (``errors``, ``tasks``, ``verdict``, ``jsonlines``, ``store``, ``pyast``) import no
component.
This ``__init__`` imports nothing, so importing any ``daemon.x`` loads only what ``x`` needs.

``daemon`` is also the import name of the python-daemon distribution. Entry points call
:func:`daemon._guard.check_import_names` first so a shadowed name fails with a clear message
instead of an obscure AttributeError later.
"""

HARNESSD_PACKAGE = True
__version__ = "0.1.0"
