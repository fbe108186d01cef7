"""config: everything a user writes down, read and checked before anything runs.

Owns: settings (``harnessd.toml`` + ``HARNESSD_*``), policies, their validation and live
reload, API-key secrets and their redaction, the state dir and its lock, the pinned
registry assets (model and data wheels), the optional extras of ``pyproject.toml`` and what
stops when one is missing (``extras``), logging set-up and ``harnessd doctor``.

May import: ``daemon.errors`` and the standard library (``doctor`` also reads the sandbox
engine and providers, lazily, to check them). Nothing else in ``daemon`` is imported here,
so every component can depend on config without a cycle.
"""
