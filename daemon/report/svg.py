"""Matplotlib figures as inline SVG that is safe to put in a page several times over.

Text is drawn as paths (matplotlib's default ``svg.fonttype``), so label strings survive
only in XML comments, which matplotlib escapes and we drop anyway. Element ids are
prefixed per figure, since several inline SVGs share one document's id space. Last, the
markup is checked for anything that could run or load something (scripts, event handlers,
foreign objects, external references): a plot with any of it is refused, not embedded.
"""

from __future__ import annotations

import io
import re
import threading
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot's import

import matplotlib.pyplot as plt

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# pyplot's figure manager is global state; one figure at a time.
LOCK = threading.Lock()

_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.S)
# matplotlib's one stylesheet (``*{stroke-linejoin: round; ...}``) would style the whole
# page; the page's own style sheet carries it, scoped to SVG.
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|xlink:href="#|href="#)([^)"]+)')
_FORBIDDEN = re.compile(
    r"<\s*(?:script|style|foreignObject|iframe|object|embed|a|image)\b"
    r"|\son\w+\s*=|javascript:|(?:xlink:)?href=\"(?!#)|url\((?!#)|@import",
    re.I,
)


class UnsafeSvg(ValueError):
    """A plot's SVG contained markup that could execute or fetch; it is not embedded."""


def new_figure(width: float = 7.5, height: float = 3.4) -> Figure:
    fig = plt.figure(figsize=(width, height), dpi=96)
    return fig


def to_svg(fig: Figure, prefix: str) -> str:
    """The figure as an ``<svg>`` element (no prolog), ids prefixed; closes the figure."""
    buffer = io.StringIO()
    try:
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    return clean(buffer.getvalue(), prefix)


def clean(text: str, prefix: str) -> str:
    text = _PROLOG.sub("", text, count=1)
    text = _COMMENT.sub("", text)
    text = _METADATA.sub("", text)
    text = _STYLE.sub("", text)
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)
    found = _FORBIDDEN.search(text)
    if found:
        raise UnsafeSvg(f"plot {prefix}: refused markup {found.group(0)[:40]!r}")
    return text.strip()
