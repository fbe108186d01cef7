"""harnessd: a daemon that keeps a live agent harness and lets it improve itself safely.

``daemon`` is also the import name of the python-daemon distribution. Entry points call
:func:`daemon._guard.check_import_names` first so a shadowed name fails with a clear message
instead of an obscure AttributeError later.
"""

HARNESSD_PACKAGE = True
__version__ = "0.1.0"
