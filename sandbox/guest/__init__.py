"""The in-container guest runtime (stdlib only; mounted read-only at /opt/harnessd).

Owns: the guest's main program (``harnessd_guest``: loads the harness, calls it, submits
its answer), the context a harness gets (``harnessd_context``: model calls, tools, turns
through the gateway socket), the lock-down that keeps harness code from the record
(``harnessd_lockdown``), the sealed submission (``harnessd_seal``), its paths
(``harnessd_paths``) and the statement numbering both sides agree on
(``harnessd_statements``); the protocol is ``PROTOCOL.md``.

May import: the standard library only, and its own modules as plain top-level modules
(never ``daemon`` or the rest of ``sandbox``: none of it is in the container).

A package only so that the host can import ``harnessd_statements``; the guest itself runs
these files as plain modules.
"""
