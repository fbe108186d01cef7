"""harnessd's sandbox: run untrusted harness code in locked-down Docker containers.

Import name guard: ``sandbox`` is a common name; ``daemon._guard`` checks at start-up that
this package, not another distribution's, is the one imported.
"""

HARNESSD_PACKAGE = True
