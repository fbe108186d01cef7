"""harnessctl as it prints into a real terminal of a given size, and what a fitting view is.

:func:`in_terminal` runs a command on a pseudo-terminal whose window size is set (as a
terminal emulator sets it), so rich measures the terminal itself rather than ``COLUMNS``;
:func:`misfits` lists what does not fit: a line wider than the terminal, a table row whose
cells ran onto a second line, a header that is not one of the view's own, whole.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from collections.abc import Iterable, Sequence

from rich.cells import cell_len

from daemon.control import views

# Control sequences (colour, cursor, hyperlinks) a terminal does not print as text.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]"
)

# Every header a fitted table of the views may show.
HEADERS = frozenset(
    col.header
    for cols in (
        views.LINEAGE_COLUMNS,
        views.GATE_COLUMNS,
        views.SCORE_COLUMNS,
        views.BUDGET_COLUMNS,
    )
    for col in cols
)


def in_terminal(
    argv: Sequence[str], *, columns: int = 80, rows: int = 40, timeout: float = 120
) -> tuple[int, str]:
    """Run ``argv`` with a ``columns`` x ``rows`` pseudo-terminal as its stdin, stdout and
    stderr; its exit code and what it printed, without control sequences."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    # Only the window size may tell the width: no COLUMNS, and a terminal that rich measures.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    output = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as exc:  # EIO: the program closed the terminal's last writer
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            output += chunk
        else:
            proc.kill()
            raise AssertionError(f"{argv} did not finish in {timeout} s: {output.decode()!r}")
    finally:
        os.close(master)
    code = proc.wait(timeout=30)
    text = _CONTROL.sub("", output.decode("utf-8", errors="replace"))
    return code, text.replace("\r\n", "\n")


def _cells(line: str, rule: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip(rule).split(rule)]


def misfits(text: str, width: int, headers: Iterable[str] = HEADERS) -> list[str]:
    """What in ``text`` does not fit a terminal ``width`` columns wide."""
    known = set(headers)
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if cell_len(line) > width:
            found.append(f"line {number} is {cell_len(line)} columns wide: {line!r}")
        if line.startswith("┃"):  # a table's header row
            for header in _cells(line, "┃"):
                if header not in known:
                    found.append(f"line {number}: header {header!r} is not a whole header")
        elif line.startswith("│") and not _cells(line, "│")[0]:
            # Every table's first column is filled: an empty one is a row's second line.
            found.append(f"line {number}: a row's cells ran onto a second line: {line!r}")
    return found


def table_rows(text: str) -> list[list[str]]:
    """The body rows of every table in ``text``, as their cells."""
    return [_cells(line, "│") for line in text.splitlines() if line.startswith("│")]
