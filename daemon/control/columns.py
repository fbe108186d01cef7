"""Tables that fit the terminal: fewer columns when it is narrow, every cell on one line.

A view names its columns in the order they are shown, each with a rank (1 is kept longest)
and whether it holds free text (a rationale, a reason). :func:`fitted` keeps the columns of
the best ranks whose narrowest useful widths fit the console, shows every kept column whole
but the free-text ones, and gives those the room left, each cell clipped to one line with an
ellipsis. A header is never clipped, and no cell wraps onto a second line: a row is always
one line. Given room (a wide terminal, ``--wide``), nothing is dropped or clipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.table import Column, Table
from rich.text import Text

# The narrowest a free-text column is shown (or its header, if longer): below this a column
# of lower rank is dropped instead, since a few letters of a rationale say nothing.
TEXT_MIN = 20


@dataclass(frozen=True)
class Col:
    header: str
    rank: int  # 1 is dropped last
    text: bool = False  # free text: clipped to the room the other columns leave


def one_line(markup: str) -> Text:
    """A cell's markup as one line of text (line breaks and runs of spaces become a space)."""
    return Text.from_markup(" ".join(markup.split()))


def _chrome(count: int) -> int:
    """Borders and padding of a table of ``count`` columns: one space each side of a cell
    and a rule between, before and after the cells."""
    return 3 * count + 1


def _shares(room: int, natural: list[int], floor: list[int]) -> list[int]:
    """``room`` split between free-text columns: the narrow ones whole, the rest in equal
    parts, none under its floor."""
    widths = [0] * len(natural)
    left, todo = room, sorted(range(len(natural)), key=lambda i: natural[i])
    while todo:
        share = left // len(todo)
        i = todo.pop(0)
        widths[i] = max(floor[i], min(natural[i], share))
        left -= widths[i]
    return widths


def fitted(columns: Sequence[Col], rows: Iterable[Sequence[str]], width: int) -> Table:
    """A table of ``rows`` (cells as rich markup) in at most ``width`` columns of text."""
    cells = [[one_line(cell) for cell in row] for row in rows]
    natural = [
        max([len(col.header), *(row[i].cell_len for row in cells)]) for i, col in enumerate(columns)
    ]
    floor = [
        min(natural[i], max(len(col.header), TEXT_MIN)) if col.text else natural[i]
        for i, col in enumerate(columns)
    ]
    kept: list[int] = []
    for i in sorted(range(len(columns)), key=lambda i: columns[i].rank):
        if kept and _chrome(len(kept) + 1) + sum(floor[k] for k in kept) + floor[i] > width:
            break  # this column and every one of lower rank are left out
        kept.append(i)
    kept.sort()
    texts = [i for i in kept if columns[i].text]
    room = width - _chrome(len(kept)) - sum(natural[i] for i in kept if not columns[i].text)
    shares = _shares(room, [natural[i] for i in texts], [floor[i] for i in texts])
    widths = dict(zip(texts, shares, strict=True))
    table = Table(
        *(
            Column(
                columns[i].header,
                no_wrap=True,
                overflow="ellipsis",
                width=widths.get(i, natural[i]),
            )
            for i in kept
        )
    )
    for row in cells:
        table.add_row(*(row[i] for i in kept))
    return table
