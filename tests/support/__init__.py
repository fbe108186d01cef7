"""Helpers shared by tests (never test modules themselves): waiting for a condition, the
refusal of heavy resources inside tests marked ``unit``. Test modules import helpers from
here or from the other non-test modules (``tests/daemon_process.py``, ``conftest`` files),
never from another ``test_*.py`` module (tests/test_layout.py checks)."""
