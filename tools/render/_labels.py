"""The text on nodes: the step's name and a second line of options (retry, timeout, checkpoint).

Labels are Graphviz HTML-like labels, so the options line can be smaller than the name. Only
options that differ from the compiled defaults (docs/graph.md) are shown: a diagram that repeated
"retry 3 times" on every node would hide the steps that were configured on purpose.
"""

from __future__ import annotations

from html import escape

from wiggle.graph import (
    Await,
    Computed,
    Condition,
    End,
    ForEach,
    Fork,
    Join,
    Node,
    Predicate,
    Retry,
    SetValues,
    Sleep,
    Subflow,
    Task,
    Text,
)

__all__ = [
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUT_MS",
    "duration",
    "full_text",
    "node_label",
    "options_line",
    "retry_text",
    "short_expression",
    "text_of",
]

DEFAULT_RETRY = Retry(max_attempts=3, backoff="exponential", initial_ms=1000, max_ms=60000)
DEFAULT_TIMEOUT_MS = 60000

# The multiplication sign, escaped because it reads like the letter x in source.
_TIMES = "\u00d7"

_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


def duration(ms: int) -> str:
    """Milliseconds as the flow format writes them: 250ms, 30s, 1m30s, 2h, 1d."""
    if ms <= 0:
        return "0s"
    parts = []
    for unit, size in _UNITS:
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def retry_text(retry: Retry) -> str:
    """'' for the default policy, else e.g. 'retry 5{times} exp 100ms..10s' (5 attempts in all)."""
    if retry == DEFAULT_RETRY:
        return ""
    if retry.max_attempts <= 1:
        return "no retry"
    if retry.backoff == "fixed":
        return f"retry {retry.max_attempts}{_TIMES} every {duration(retry.initial_ms)}"
    span = f"{duration(retry.initial_ms)}..{duration(retry.max_ms)}"
    return f"retry {retry.max_attempts}{_TIMES} exp {span}"


def _activity_options(retry: Retry, timeout_ms: int) -> list[str]:
    parts = [retry_text(retry)]
    if timeout_ms != DEFAULT_TIMEOUT_MS:
        parts.append(f"timeout {duration(timeout_ms)}")
    return [p for p in parts if p]


def options_line(node: Node) -> str:
    """The node's non-default options joined with ' · ', or ''."""
    parts: list[str] = []
    if isinstance(node, Task | Join | Predicate):
        parts += _activity_options(node.retry, node.timeout_ms)
    if isinstance(node, Task) and node.checkpoint:
        parts.append("⚑ checkpoint")
    if isinstance(node, Predicate | Condition) and node.max_iterations is not None:
        parts.append(f"max {node.max_iterations} iterations")
    if isinstance(node, ForEach) and node.max_concurrency is not None:
        parts.append(f"max {node.max_concurrency} at once")
    if isinstance(node, Await):
        if node.timeout_ms is not None:
            parts.append(f"deadline {duration(node.timeout_ms)}")
        if node.human is not None:
            parts += _human_options(node)
        if node.apply is not None:
            parts += _activity_options(node.apply.retry, node.apply.timeout_ms)
    return " · ".join(parts)


def _human_options(node: Await) -> list[str]:
    """A human task's times and rules: when it is due, reminders, approvals, who may not."""
    human = node.human
    assert human is not None
    parts = []
    if human.due_ms is not None:
        parts.append(f"due {duration(human.due_ms)}")
    if human.remind_ms:
        parts.append("remind " + ", ".join(duration(ms) for ms in human.remind_ms))
    if human.approvals != 1:
        parts.append(f"{human.approvals} approvals")
    if human.exclude:
        parts.append("not " + ", ".join(e.replace("_", " ") for e in human.exclude))
    return parts


def text_of(value: Text, limit: int = 40) -> str:
    """A human task's text or person on one line: as written, or `= expression`, shortened."""
    if isinstance(value, Computed):
        return "= " + short_expression(value.expression, limit - 2)
    return short_expression(value, limit)


def _people(node: Await) -> str:
    """Who may take a human task, on one line: `alice · bob, group finance`."""
    human = node.human
    assert human is not None
    who = [text_of(p, 24) for p in human.candidates.people]
    who += [f"group {text_of(g, 24)}" for g in human.candidates.groups]
    shown = ", ".join(who)
    if human.assignee is not None:
        shown = text_of(human.assignee, 24) + (f" · {shown}" if shown else "")
    return f"for {shown}"


def _head(node: Node) -> tuple[str, str]:
    """(small prefix, bold name) naming what the node does."""
    if isinstance(node, Task):
        return "", node.activity
    if isinstance(node, Predicate):
        if node.max_iterations is not None:
            prefix = "while"
        elif node.alt is None:
            prefix = "filter"
        else:
            prefix = "when"
        return prefix, f"{node.activity}?"
    if isinstance(node, Condition):
        if node.max_iterations is not None:
            return "while", node.id
        return ("filter" if node.alt is None else "if"), node.id
    if isinstance(node, SetValues):
        return "set", ", ".join(node.values)
    if isinstance(node, Fork):
        return "parallel", node.id
    if isinstance(node, ForEach):
        return "for each", node.items
    if isinstance(node, Join):
        return "combine", node.activity
    if isinstance(node, Sleep):
        if node.duration_ms is not None:
            return "◷ sleep", duration(node.duration_ms)
        if node.until_expression is not None:
            return "◷ sleep until", short_expression(node.until_expression, 32)
        return "◷ sleep until", str(node.until)
    if isinstance(node, Await) and node.human is not None:
        title = node.human.title
        return "✍ human task", node.id if isinstance(title, Computed) else text_of(title)
    if isinstance(node, Await):
        return "✉ await", node.signal
    if isinstance(node, Subflow):
        return "subflow", node.flow
    assert isinstance(node, End)
    return "", "end"


def _secondary(node: Node) -> list[str]:
    lines = []
    # A join's id is always derived from its fork's, so only steps can carry a telling id.
    named = node.activity if isinstance(node, Task | Predicate) else None
    if named is not None and node.id != named:
        lines.append(f"id {node.id}")
    if isinstance(node, Await) and node.human is not None:
        if isinstance(node.human.title, Computed):
            lines.append("title " + text_of(node.human.title, 32))
        else:
            lines.append(f"id {node.id}")
        lines.append(_people(node))
        if node.human.into is not None:
            lines.append(f"answer into {node.human.into}")
    if isinstance(node, Await) and node.apply is not None:
        lines.append(f"apply {node.apply.activity}")
    if isinstance(node, SetValues):
        lines += [f"{key} = {short_expression(src, 32)}" for key, src in node.values.items()]
    if isinstance(node, Subflow) and node.version is not None:
        lines.append(f"@ {node.version[:19]}…")
    return lines


def short_expression(source: str, limit: int = 40) -> str:
    """An expression on one line, cut to `limit` characters (the full text goes in a tooltip)."""
    text = " ".join(source.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def full_text(node: Node) -> str:
    """What hovering over a node shows: its id, and an expression node's expressions in full."""
    if isinstance(node, Condition):
        return f"{node.id}: {node.expression}"
    if isinstance(node, SetValues):
        return "\n".join([node.id, *(f"{k} = {v}" for k, v in node.values.items())])
    if isinstance(node, Sleep) and node.until_expression is not None:
        return f"{node.id}: until {node.until_expression}"
    if isinstance(node, Await) and node.human is not None:
        lines = [f"{node.id}: human task, answered by the signal {node.signal}"]
        for name, value in (
            ("title", node.human.title),
            ("instructions", node.human.instructions),
            ("assignee", node.human.assignee),
        ):
            if value is not None:
                lines.append(f"{name}: {_whole(value)}")
        for group in ("people", "groups"):
            entries = getattr(node.human.candidates, group)
            if entries:
                lines.append(f"{group}: " + ", ".join(_whole(e) for e in entries))
        return "\n".join(lines)
    return node.id


def _whole(value: Text) -> str:
    return f"= {value.expression}" if isinstance(value, Computed) else value


def _small(text: str) -> str:
    return f'<FONT POINT-SIZE="9">{escape(text, quote=False)}</FONT>'


def node_label(node: Node, state_line: str = "") -> str:
    """The HTML-like label (without the outer angle brackets) for `node`."""
    prefix, name = _head(node)
    rows: list[str] = []
    if prefix:
        rows.append(_small(prefix))
    rows.append(f"<B>{escape(name, quote=False)}</B>")
    rows += [_small(line) for line in _secondary(node)]
    options = options_line(node)
    if options:
        rows.append(_small(options))
    if state_line:
        rows.append(f'<FONT POINT-SIZE="9"><B>{escape(state_line, quote=False)}</B></FONT>')
    return "<BR/>".join(rows)
