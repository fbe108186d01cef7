"""The in-container guest runtime (stdlib only; mounted read-only at /opt/harnessd).

A package only so that the host can import ``harnessd_statements``, the statement
numbering both sides must agree on; the guest itself runs these files as plain modules.
"""
