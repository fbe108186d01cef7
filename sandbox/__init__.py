"""harnessd's sandbox: run untrusted harness code in locked-down Docker containers.

Owns: the Docker engine client (``engine``), one hardened container and its limits
(``container``, ``limits``, ``labels``), its output (``output``), the run directory a
container gets (``rundir``), Unix sockets (``unix``), the image recipe (``image`` and the
``image/`` folder), the node side of a remote unit and the bridge that carries a
container's socket to the daemon's gateway over TLS (``remote``, ``bridge``), the
sandbox's errors (``errors``), the in-container guest runtime (``guest``) and the code-check
boundary (``codecheck``).

May import: the standard library, anyio and the Docker SDK; never ``daemon`` (the layout test
checks it), so the same code runs on a cluster node that has no daemon.

Import name guard: ``sandbox`` is a common name; ``daemon._guard`` checks at start-up that
this package, not another distribution's, is the one imported.
"""

HARNESSD_PACKAGE = True
