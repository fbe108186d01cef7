"""Reading a report page back: its elements and text as an HTML parser sees them, and the
list of everything on it that could run or fetch."""

from __future__ import annotations

from html.parser import HTMLParser

ACTIVE = ("script", "iframe", "object", "embed", "img", "image", "foreignobject", "link")


class Page(HTMLParser):
    """Every element with its attributes, and the page's text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._plot: str | None = None
        self.plot_paths: dict[str, int] = {}
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.elements.append((tag, found))
        if tag == "figure" and found.get("data-plot"):
            self._plot = found["data-plot"]
            self.plot_paths[self._plot] = 0
        elif tag in ("path", "use", "rect") and self._plot:
            self.plot_paths[self._plot] += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._plot = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == name]

    def attr(self, tag: str, name: str) -> list[str]:
        return [str(a[name]) for a in self.tags(tag) if a.get(name)]


def active(page: Page) -> list[str]:
    """Everything on the page that could run or fetch; empty when the page is inert."""
    found = []
    for tag, attrs in page.elements:
        if tag in ACTIVE:
            found.append(tag)
        for name, value in attrs.items():
            if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                found.append(f"{tag}[{name}]")
            if name in ("href", "xlink:href", "src") and not (value or "").startswith("#"):
                found.append(f"{tag}[{name}={value}]")
    found += [f"style #{i}" for i, _ in enumerate(page.tags("style")) if i > 0]
    return found
