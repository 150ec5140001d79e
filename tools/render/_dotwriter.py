"""A tiny DOT text writer: quoting, attribute lists, nested subgraphs.

The diagram is written as DOT text directly (rather than through graphviz.Digraph) so the output
is deterministic, fully typed, and easy for tests to read; the graphviz package only runs `dot`.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DotWriter", "Html", "quote"]


class Html(str):
    """An attribute value written as a Graphviz HTML-like label: `<...>`, not quoted."""

    __slots__ = ()


def quote(text: str) -> str:
    """A DOT double-quoted string. Backslashes are doubled so a name is never read as a label
    escape (\\n, \\N, ...)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _value(value: str) -> str:
    if isinstance(value, Html):
        return f"<{value}>"
    return quote(value)


def attr_list(attrs: Mapping[str, str]) -> str:
    """`[a="1", b="2"]` in the given order, or '' when empty."""
    if not attrs:
        return ""
    return " [" + ", ".join(f"{key}={_value(value)}" for key, value in attrs.items()) + "]"


class DotWriter:
    """Collects indented DOT lines."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._depth = 0

    def line(self, text: str) -> None:
        self._lines.append("    " * self._depth + text)

    def open(self, header: str) -> None:
        self.line(header + " {")
        self._depth += 1

    def close(self) -> None:
        self._depth -= 1
        self.line("}")

    def defaults(self, what: str, attrs: Mapping[str, str]) -> None:
        """`graph [...]`, `node [...]` or `edge [...]`."""
        self.line(what + attr_list(attrs))

    def attrs(self, attrs: Mapping[str, str]) -> None:
        """Graph attributes as statements (`key=value;`), as clusters want them."""
        for key, value in attrs.items():
            self.line(f"{key}={_value(value)}")

    def node(self, node_id: str, attrs: Mapping[str, str]) -> None:
        self.line(quote(node_id) + attr_list(attrs))

    def edge(self, source: str, target: str, attrs: Mapping[str, str]) -> None:
        self.line(f"{quote(source)} -> {quote(target)}" + attr_list(attrs))

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
