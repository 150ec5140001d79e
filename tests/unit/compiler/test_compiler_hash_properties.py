"""Property tests: formatting never changes a flow's version; behaviour always does."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wiggle.compiler import load_flow
from wiggle.compiler._schema import graph_validator

GRAPH_SCHEMA = graph_validator()

# -- random flows --------------------------------------------------------------------------------

queues = st.sampled_from(["default", "fast", "slow.q"])
durations = st.sampled_from(["250ms", "30s", "5m", "2h", "1d"])
retries = st.fixed_dictionaries(
    {},
    optional={
        "max_attempts": st.integers(1, 9),
        "backoff": st.sampled_from(["fixed", "exponential"]),
        "initial": st.sampled_from(["100ms", "1s"]),
        "max": st.sampled_from(["10s", "2m"]),
    },
)
options = {"queue": queues, "retry": retries, "timeout": durations}

task = st.fixed_dictionaries({"task": st.none()}, optional={**options, "checkpoint": st.booleans()})
filter_ = st.fixed_dictionaries({"filter": st.none()}, optional=options)
sleep = st.fixed_dictionaries(
    {"sleep": st.one_of(durations, st.just({"until": "/wake~1at"}))},
    optional={"description": st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=5)},
)
await_ = st.fixed_dictionaries(
    {"await": st.none()}, optional={"timeout": durations, "apply": st.none()}
)
subflow = st.fixed_dictionaries(
    {"subflow": st.none()},
    optional={"version": st.just("sha256:" + "0f" * 32)},
)
leaf = st.one_of(task, filter_, sleep, await_, subflow)


def compound(inner: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    arm = st.fixed_dictionaries({"when": st.none(), "steps": inner})
    return st.one_of(
        st.fixed_dictionaries(
            {"choice": st.lists(arm, min_size=1, max_size=2)}, optional={"otherwise": inner}
        ),
        st.fixed_dictionaries(
            {
                "parallel": st.dictionaries(
                    st.sampled_from(["a", "b", "zz", "B"]), inner, min_size=1, max_size=3
                ),
                "combine": st.none(),
            },
            optional=options,
        ),
        st.fixed_dictionaries(
            {
                "for_each": st.sampled_from(["", "/items", "/a~0b/0"]),
                "steps": inner,
                "combine": st.none(),
            },
            optional={"max_concurrency": st.integers(1, 5), **options},
        ),
        st.fixed_dictionaries(
            {
                "loop": st.fixed_dictionaries(
                    {"steps": inner, "while": st.none()},
                    optional={"max_iterations": st.integers(1, 50)},
                )
            },
            optional=options,
        ),
        st.fixed_dictionaries(
            {"await": st.none(), "timeout": durations, "on_timeout": inner},
        ),
    )


steps = st.recursive(
    st.lists(leaf, min_size=1, max_size=3),
    lambda inner: st.lists(st.one_of(leaf, compound(inner)), min_size=1, max_size=3),
    max_leaves=10,
)
NAMED = ("task", "filter", "await", "when", "while", "combine", "apply", "subflow")


def _name_all(value: Any, counter: itertools.count[int]) -> Any:
    """Give every activity and signal a unique name, so node ids never clash."""
    if isinstance(value, dict):
        out = {}
        for key, sub in value.items():
            out[key] = (
                f"act_{next(counter)}" if key in NAMED and sub is None else _name_all(sub, counter)
            )
        return out
    if isinstance(value, list):
        return [_name_all(v, counter) for v in value]
    return value


@st.composite
def flows(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(steps)
    flow: dict[str, Any] = {"wiggle": 1, "name": "prop", "steps": body}
    if draw(st.booleans()):
        flow["queue"] = draw(queues)
    if draw(st.booleans()):
        flow["execution"] = draw(st.sampled_from(["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"]))
    if draw(st.booleans()):
        flow["input"] = {"type": "object", "properties": {"n": {"maximum": 2.5}}}
    named: dict[str, Any] = _name_all(flow, itertools.count(1))
    return named


# -- many spellings of one document -------------------------------------------------------------


def _scalar(value: Any, draw: st.DrawFn) -> str:
    if isinstance(value, bool):
        return draw(st.sampled_from(["true", "True"] if value else ["false", "FALSE"]))
    if isinstance(value, int):
        return draw(st.sampled_from([str(value), f"0x{value:x}", f"+{value}"]))
    if isinstance(value, float):
        return draw(st.sampled_from([repr(value), f"{value:e}"]))
    text = str(value)
    styles = ["'" + text.replace("'", "''") + "'", json.dumps(text)]
    # Plain only where YAML would read the same string back.
    if text and text.replace("_", "a").replace(".", "a").isalnum() and not text[0].isdigit():
        styles.append(text)
    if text in ("true", "false", "null") or not text.isascii():
        styles = styles[:2]
    return draw(st.sampled_from(styles))


def _shuffled(items: list[Any], draw: st.DrawFn) -> list[Any]:
    return draw(st.permutations(items))


def _flow_style(value: Any, draw: st.DrawFn) -> str:
    sp = draw(st.sampled_from(["", " ", "  "]))
    if isinstance(value, dict):
        parts = [
            f"{_scalar(k, draw)}:{sp or ' '}{_flow_style(v, draw)}"
            for k, v in _shuffled(list(value.items()), draw)
        ]
        return "{" + sp + f",{sp}".join(parts) + sp + "}"
    if isinstance(value, list):
        return "[" + sp + f",{sp}".join(_flow_style(v, draw) for v in value) + sp + "]"
    return _scalar(value, draw)


def _block_style(value: Any, indent: int, draw: st.DrawFn) -> list[str]:
    """Lines of `value` as a block collection; leaves and small parts may go flow style."""
    pad = " " * indent
    lines: list[str] = []

    def comment() -> str:
        return draw(st.sampled_from(["", "  # note", " #: x: [y"]))

    if isinstance(value, dict):
        for k, v in _shuffled(list(value.items()), draw):
            if draw(st.booleans()):
                lines.append(f"{pad}# comment about {k}")
            key = _scalar(k, draw)
            if isinstance(v, dict | list) and v and draw(st.booleans()):
                lines.append(f"{pad}{key}:{comment()}")
                step = draw(st.sampled_from([2, 4]))
                lines.extend(_block_style(v, indent + step, draw))
            else:
                lines.append(f"{pad}{key}: {_flow_style(v, draw)}{comment()}")
    else:
        for v in value:
            if isinstance(v, dict | list) and v and draw(st.booleans()):
                inner = _block_style(v, indent + 2, draw)
                lines.append(f"{pad}- {inner[0].lstrip()}" if not inner[0].lstrip().startswith("#")
                             else f"{pad}-")  # fmt: skip
                lines.extend(inner[1:] if not inner[0].lstrip().startswith("#") else inner)
            else:
                lines.append(f"{pad}- {_flow_style(v, draw)}{comment()}")
    return lines


@st.composite
def spellings(draw: st.DrawFn, flow: dict[str, Any]) -> str:
    kind = draw(st.sampled_from(["json", "json-indent", "flow", "block"]))
    if kind.startswith("json"):
        keys_shuffled = json.loads(json.dumps(flow))  # a copy whose key order we may permute

        def permute(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: permute(v[k]) for k in _shuffled(list(v), draw)}
            if isinstance(v, list):
                return [permute(x) for x in v]
            return v

        indent = 2 if kind == "json-indent" else None
        return json.dumps(permute(keys_shuffled), indent=indent, ensure_ascii=draw(st.booleans()))
    if kind == "flow":
        return "# a flow\n" + _flow_style(flow, draw) + "\n"
    return "\n".join(_block_style(flow, 0, draw)) + "\n"


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.data())
def test_formatting_never_changes_the_version(data: st.DataObject) -> None:
    flow = data.draw(flows())
    reference = load_flow(json.dumps(flow))
    text = data.draw(spellings(flow))
    assert load_flow(text).version == reference.version, text


# -- behavioural changes ------------------------------------------------------------------------


def _all_steps(steps: list[Any]) -> list[tuple[list[Any], int]]:
    """(containing list, index) of every step, nested ones included."""
    out = []
    for i, step in enumerate(steps):
        out.append((steps, i))
        for key in ("otherwise", "steps", "on_timeout"):
            if isinstance(step.get(key), list):
                out.extend(_all_steps(step[key]))
        for arm in step.get("choice", []):
            out.extend(_all_steps(arm["steps"]))
        for branch in step.get("parallel", {}).values():
            out.extend(_all_steps(branch))
        if "loop" in step:
            out.extend(_all_steps(step["loop"]["steps"]))
    return out


def _behaviour(step: dict[str, Any]) -> str:
    """The step without its documentation, as comparable text."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "description"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return json.dumps(strip(step), sort_keys=True)


def _tasks(flow: dict[str, Any]) -> list[dict[str, Any]]:
    return [seq[i] for seq, i in _all_steps(flow["steps"]) if "task" in seq[i]]


@FAST
@given(st.data())
def test_behavioural_changes_always_change_the_version(data: st.DataObject) -> None:
    flow = data.draw(flows())
    before = load_flow(json.dumps(flow)).version
    changed = copy.deepcopy(flow)
    tasks = _tasks(changed)
    change = data.draw(st.sampled_from(["rename", "retry", "queue", "reorder", "flow-queue"]))
    if change == "rename" and tasks:
        data.draw(st.sampled_from(tasks))["task"] = "renamed_activity"
    elif change == "retry" and tasks:
        target = data.draw(st.sampled_from(tasks))
        retry = target.setdefault("retry", {})
        retry["max_attempts"] = retry.get("max_attempts", 3) + 1
    elif change == "queue" and tasks:
        target = data.draw(st.sampled_from(tasks))
        target["queue"] = "elsewhere"
    elif change == "reorder" and len({_behaviour(s) for s in changed["steps"]}) > 1:
        # Swapping two steps that differ only in their descriptions is no change at all.
        seq = changed["steps"]
        i = data.draw(
            st.integers(0, len(seq) - 2).filter(
                lambda k: _behaviour(seq[k]) != _behaviour(seq[k + 1])
            )
        )
        seq[i], seq[i + 1] = seq[i + 1], seq[i]
    else:
        # Every flow has at least one activity somewhere; move the whole flow to a new queue
        # unless nothing uses the flow's queue (then change the flow's name instead).
        changed["name"] = "prop-renamed"
    assert load_flow(json.dumps(changed)).version != before


@settings(max_examples=50, deadline=None)
@given(flows())
def test_compiled_output_is_stable_and_well_formed(flow: dict[str, Any]) -> None:
    first = load_flow(json.dumps(flow))
    second = load_flow(json.dumps(flow, indent=1))
    assert first.canonical == second.canonical
    assert first.graph.nodes.keys() == first.document["nodes"].keys()
    GRAPH_SCHEMA.validate(first.document)
