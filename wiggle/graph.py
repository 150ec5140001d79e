"""The compiled graph as typed, immutable data: the one model every part of Wiggle reads.

The compiler produces the canonical graph as a plain JSON document (see docs/graph.md and
spec/schema/graph.schema.json); `Graph.from_json` turns that document into the dataclasses
below, which the engine, the workers and the renderer share. Nothing here does I/O.

Edges are named on the node that owns them:

| kind      | edges                                                                     |
|-----------|---------------------------------------------------------------------------|
| task      | next                                                                      |
| predicate | next (true), alt (false; None on a filter: the token ends, filtered)      |
| condition | as a predicate; an expression gives the boolean                           |
| set       | next (an expression per context key gives the new values)                 |
| fork      | branches (name -> first node of the branch), join                         |
| join      | next (after the combine activity ran)                                     |
| foreach   | body (first node of the per-element body), join                           |
| sleep     | next                                                                      |
| await     | next (signal received / apply ran), on_timeout (deadline passed)          |
|           | (a human step is an await whose `human` holds the task's descriptor)      |
| subflow   | next                                                                      |
| end       | (none)                                                                    |

The last node of a fork branch or a foreach body has `next` pointing at the join.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from wiggle.jsonvalue import type_name

__all__ = [
    "EXPRESSION_KINDS",
    "HUMAN_SIGNAL_PREFIX",
    "WORKER_KINDS",
    "Await",
    "Candidates",
    "Computed",
    "Condition",
    "End",
    "ExecutionMode",
    "ForEach",
    "Fork",
    "Graph",
    "HumanTask",
    "Join",
    "Node",
    "OutEdge",
    "Predicate",
    "Retry",
    "SearchAttribute",
    "SearchType",
    "SetValues",
    "Sleep",
    "Subflow",
    "Task",
    "Text",
    "out_edges",
    "successors",
]


class ExecutionMode(StrEnum):
    """Who drives a run of steps and when it is committed (docs/flow-format.md)."""

    DEFAULT = "DEFAULT"  # defer to the server's WIGGLE_EXECUTION_MODE (itself default SERVER)
    SERVER = "SERVER"  # the server advances one node per step; one commit per step
    LOCAL_SYNC = "LOCAL_SYNC"  # the worker chains steps; each committed before the next runs
    LOCAL_ASYNC = "LOCAL_ASYNC"  # the worker chains steps; buffered, committed at handback


@dataclass(frozen=True)
class Retry:
    """When a failed attempt is tried again. Attempts are numbered from 1."""

    max_attempts: int
    backoff: str  # "fixed" | "exponential"
    initial_ms: int
    max_ms: int

    def delay_ms(self, failed_attempt: int) -> int:
        """The pause before the attempt after `failed_attempt` (which is 1-based)."""
        if self.backoff == "fixed":
            return self.initial_ms
        return min(self.max_ms, self.initial_ms * (1 << (failed_attempt - 1)))

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> Retry:
        return Retry(doc["max_attempts"], doc["backoff"], doc["initial_ms"], doc["max_ms"])


@dataclass(frozen=True)
class _Activity:
    """The fields of a node that a worker runs."""

    id: str
    activity: str
    queue: str
    retry: Retry
    timeout_ms: int


@dataclass(frozen=True)
class Task(_Activity):
    next: str
    checkpoint: bool
    kind: str = "task"


@dataclass(frozen=True)
class Predicate(_Activity):
    """A filter, a choice arm or a loop's `while`: true follows `next`, false follows `alt`.

    `alt is None` marks a filter: false ends the token as filtered (the instance at top level,
    the branch inside a fork or foreach). `max_iterations` is set on a loop's `while` predicate,
    whose `next` is the back edge to the loop body.
    """

    next: str
    alt: str | None
    max_iterations: int | None
    kind: str = "predicate"


@dataclass(frozen=True)
class Condition:
    """A predicate whose boolean a CEL expression gives (`if`): a filter, a choice arm or a
    loop's `while` written as an expression. Nobody leases it: whoever moves a token onto it
    (the server, or a worker in a local run) evaluates it on the spot."""

    id: str
    expression: str  # the `if` field, as written
    next: str
    alt: str | None
    max_iterations: int | None
    kind: str = "condition"


@dataclass(frozen=True)
class SetValues:
    """A `set` step: each context key's new value is a CEL expression of the context."""

    id: str
    values: Mapping[str, str]
    next: str
    kind: str = "set"


@dataclass(frozen=True)
class Fork:
    id: str
    branches: Mapping[str, str]
    join: str
    kind: str = "fork"


@dataclass(frozen=True)
class ForEach:
    id: str
    items: str  # JSON pointer into the context
    body: str
    join: str
    max_concurrency: int | None
    kind: str = "foreach"


@dataclass(frozen=True)
class Join(_Activity):
    """The barrier of a fork or foreach; once every branch arrived, `activity` combines."""

    fork: str
    next: str
    kind: str = "join"


@dataclass(frozen=True)
class Sleep:
    id: str
    duration_ms: int | None
    until: str | None  # JSON pointer to an RFC 3339 instant in the context
    next: str
    # A CEL expression giving the instant; only in graphs that use it, so that the graphs of
    # sleeps by duration or pointer (and their versions) are as they always were.
    until_expression: str | None = None
    kind: str = "sleep"


@dataclass(frozen=True)
class ApplySignal:
    activity: str
    queue: str
    retry: Retry
    timeout_ms: int


@dataclass(frozen=True)
class Computed:
    """A value of a human task that a CEL expression gives (`{expr: ...}` in the flow),
    evaluated against the context when the task is created."""

    expression: str


#: A human task's text or person: written out, or computed.
Text = str | Computed


@dataclass(frozen=True)
class Candidates:
    """Who may take a human task: people, and groups whose members may (entries as written)."""

    people: tuple[Text, ...] = ()
    groups: tuple[Text, ...] = ()


@dataclass(frozen=True)
class HumanTask:
    """What a person is asked at a human step (docs/flow-format.md, `human`): the step is an
    await of the signal `task:<step id>`, and this says what the task looks like and who may
    answer it."""

    title: Text
    instructions: Text | None
    form: Mapping[str, Any] | bool  # a JSON Schema of the answer
    assignee: Text | None
    candidates: Candidates
    due_ms: int | None
    remind_ms: tuple[int, ...]  # after the task is created, ascending
    exclude: tuple[str, ...]  # "last_actor", "starter"
    approvals: int
    into: str | None  # the context key the answer goes under, or None

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> HumanTask:
        candidates = doc["candidates"]
        return HumanTask(
            title=_text(doc["title"]),
            instructions=None if doc["instructions"] is None else _text(doc["instructions"]),
            form=doc["form"],
            assignee=None if doc["assignee"] is None else _text(doc["assignee"]),
            candidates=Candidates(
                tuple(_text(p) for p in candidates["people"]),
                tuple(_text(g) for g in candidates["groups"]),
            ),
            due_ms=doc["due_ms"],
            remind_ms=tuple(doc["remind_ms"]),
            exclude=tuple(doc["exclude"]),
            approvals=doc["approvals"],
            into=doc["into"],
        )


def _text(value: str | Mapping[str, str]) -> Text:
    return value if isinstance(value, str) else Computed(value["expr"])


#: The prefix of a human step's signal name. An await's own signal is a node id, which has no
#: ':', so no await of a flow can take a human task's signal.
HUMAN_SIGNAL_PREFIX = "task:"


@dataclass(frozen=True)
class Await:
    id: str
    signal: str
    timeout_ms: int | None
    on_timeout: str | None  # set exactly when timeout_ms is; equals next when no on_timeout steps
    apply: ApplySignal | None
    next: str
    # A human step's task; only in graphs that have one, so that every other await (and its
    # graph's version) is as it always was.
    human: HumanTask | None = None
    kind: str = "await"

    def signalled(self, context: Any, payload: Any) -> Any:
        """The context after the signal came, when no `apply` step runs: unchanged, or, for a
        human step with `into`, the context with the answer under that key (replaced or
        added, the other keys as they were). ValueError when `into` meets a context that is
        not an object."""
        into = self.human.into if self.human is not None else None
        if into is None:
            return context
        if not isinstance(context, dict):
            raise ValueError(
                f"human step {self.id!r} puts its answer under {into!r}, which needs an object "
                f"context; the context is {type_name(context)}"
            )
        return {**context, into: payload}


@dataclass(frozen=True)
class Subflow:
    id: str
    flow: str
    version: str | None
    next: str
    kind: str = "subflow"


@dataclass(frozen=True)
class End:
    id: str
    kind: str = "end"


Node = (
    Task | Predicate | Condition | SetValues | Fork | ForEach | Join | Sleep | Await | Subflow | End
)

#: Node kinds a worker executes (and so may chain locally).
WORKER_KINDS = frozenset({"task", "predicate"})
#: Node kinds an expression decides: evaluated where the token reaches them, never leased.
EXPRESSION_KINDS = frozenset({"condition", "set"})


def _activity_fields(node_id: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": node_id,
        "activity": doc["activity"],
        "queue": doc["queue"],
        "retry": Retry.from_json(doc["retry"]),
        "timeout_ms": doc["timeout_ms"],
    }


def _node_from_json(node_id: str, doc: Mapping[str, Any]) -> Node:
    kind = doc["kind"]
    if kind == "task":
        return Task(
            **_activity_fields(node_id, doc), next=doc["next"], checkpoint=doc["checkpoint"]
        )
    if kind == "predicate":
        return Predicate(
            **_activity_fields(node_id, doc),
            next=doc["next"],
            alt=doc["alt"],
            max_iterations=doc["max_iterations"],
        )
    if kind == "condition":
        return Condition(node_id, doc["if"], doc["next"], doc["alt"], doc["max_iterations"])
    if kind == "set":
        return SetValues(node_id, dict(doc["values"]), doc["next"])
    if kind == "fork":
        return Fork(node_id, dict(doc["branches"]), doc["join"])
    if kind == "foreach":
        return ForEach(node_id, doc["items"], doc["body"], doc["join"], doc["max_concurrency"])
    if kind == "join":
        return Join(**_activity_fields(node_id, doc), fork=doc["fork"], next=doc["next"])
    if kind == "sleep":
        return Sleep(
            node_id,
            doc["duration_ms"],
            doc["until"],
            doc["next"],
            until_expression=doc.get("until_expression"),
        )
    if kind == "await":
        apply = doc["apply"]
        return Await(
            node_id,
            doc["signal"],
            doc["timeout_ms"],
            doc["on_timeout"],
            None
            if apply is None
            else ApplySignal(
                apply["activity"],
                apply["queue"],
                Retry.from_json(apply["retry"]),
                apply["timeout_ms"],
            ),
            doc["next"],
            human=HumanTask.from_json(doc["human"]) if doc.get("human") is not None else None,
        )
    if kind == "subflow":
        return Subflow(node_id, doc["flow"], doc["version"], doc["next"])
    if kind == "end":
        return End(node_id)
    raise ValueError(f"unknown node kind {kind!r} at node {node_id!r}")


class SearchType(StrEnum):
    """What a search attribute holds (docs/flow-format.md, `search`)."""

    STRING = "string"
    NUMBER = "number"
    BOOL = "bool"
    TIME = "time"  # an RFC 3339 instant in the context


@dataclass(frozen=True)
class SearchAttribute:
    """A named value taken from the context by JSON Pointer, indexed for finding instances."""

    name: str
    pointer: str
    type: SearchType


@dataclass(frozen=True)
class Graph:
    """A compiled flow: its identity, its options and its nodes by id."""

    name: str
    version: str  # "sha256:<64 hex>" of the canonical JSON
    execution: ExecutionMode
    input_schema: Mapping[str, Any] | None
    start: str
    nodes: Mapping[str, Node]
    search: Mapping[str, SearchAttribute] = field(default_factory=dict)

    @staticmethod
    def from_json(doc: Mapping[str, Any], version: str) -> Graph:
        """Build from the canonical graph document and the version the compiler hashed it to."""
        nodes = {node_id: _node_from_json(node_id, n) for node_id, n in doc["nodes"].items()}
        search = {
            name: SearchAttribute(name, spec["pointer"], SearchType(spec["type"]))
            for name, spec in (doc.get("search") or {}).items()
        }
        return Graph(
            name=doc["name"],
            version=version,
            execution=ExecutionMode(doc["execution"]),
            input_schema=doc["input"],
            start=doc["start"],
            nodes=nodes,
            search=search,
        )

    def node(self, node_id: str) -> Node:
        return self.nodes[node_id]

    @functools.cached_property
    def branches(self) -> bool:
        """Whether an instance can hold more than one token (a fork or a for_each)."""
        return any(isinstance(n, Fork | ForEach) for n in self.nodes.values())

    @functools.cached_property
    def subflows(self) -> bool:
        """Whether an instance can start child instances."""
        return any(isinstance(n, Subflow) for n in self.nodes.values())

    @functools.cached_property
    def scopes(self) -> Mapping[str, tuple[str, ...]]:
        """Node id -> the parallel / for_each blocks enclosing it, outermost first (empty at
        the top level). A block's own fork node and its join are outside it; the steps of its
        branches (or of its body) are inside."""
        inside: dict[str, list[str]] = {node_id: [] for node_id in self.nodes}
        for node in self.nodes.values():
            if not isinstance(node, Fork | ForEach):
                continue
            starts = list(node.branches.values()) if isinstance(node, Fork) else [node.body]
            seen: set[str] = set()
            todo = [n for n in starts if n != node.join]
            while todo:
                node_id = todo.pop()
                if node_id in seen:
                    continue
                seen.add(node_id)
                todo.extend(n for n in successors(self.nodes[node_id]) if n != node.join)
            for node_id in seen:
                inside[node_id].append(node.id)
        # Outermost first: an enclosing block encloses fewer nodes' worth of blocks itself.
        depth = {node_id: len(blocks) for node_id, blocks in inside.items()}
        return {
            node_id: tuple(sorted(blocks, key=lambda b: depth[b]))
            for node_id, blocks in inside.items()
        }

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())


def successors(node: Node) -> list[str]:
    """The ids a token may move to from `node` (a fork's branches, not its join)."""
    if isinstance(node, Fork):
        return list(node.branches.values())
    if isinstance(node, ForEach):
        return [node.body]
    out: list[str | None] = [getattr(node, "next", None)]
    if isinstance(node, Predicate | Condition):
        out.append(node.alt)
    if isinstance(node, Await):
        out.append(node.on_timeout)
    return [n for n in out if n]


@dataclass(frozen=True)
class OutEdge:
    """One way a token can leave a node, named by what it means (`role`):

    | role       | out of                     | taken when                                  |
    |------------|----------------------------|---------------------------------------------|
    | next       | task, set, join, sleep, subflow | the step, combine, timer or child is done |
    | true       | filter, choice arm         | the predicate (condition) was true          |
    | back       | a loop's `while`           | it returned true: the body runs again       |
    | false      | choice arm, loop's `while` | it returned false (out of a loop: the exit) |
    | filtered   | filter                     | it returned false: the token ends (no target) |
    | branch     | fork                       | the fork was reached; `branch` names it     |
    | body       | foreach                    | the collection had an element               |
    | signal     | await                      | the signal came (and `apply` ran)           |
    | on_timeout | await                      | the deadline passed first                   |

    A fork's or foreach's own join is not an edge out of it: tokens reach a join through the
    last step of each branch.
    """

    source: str
    target: str | None
    role: str
    branch: str = ""

    @property
    def key(self) -> str:
        """A stable name: `source -role-> target` (`branch:NAME` for a branch)."""
        role = f"branch:{self.branch}" if self.role == "branch" else self.role
        return f"{self.source} -{role}-> {self.target or '(filtered)'}"


def out_edges(node: Node) -> list[OutEdge]:
    """The edges out of `node`, in a fixed order (the renderer lays them out in this order)."""
    if isinstance(node, Task | SetValues | Join | Sleep | Subflow):
        return [OutEdge(node.id, node.next, "next")]
    if isinstance(node, Predicate | Condition):
        true = OutEdge(node.id, node.next, "back" if node.max_iterations is not None else "true")
        false = (
            OutEdge(node.id, None, "filtered")
            if node.alt is None
            else OutEdge(node.id, node.alt, "false")
        )
        return [true, false]
    if isinstance(node, Fork):
        return [OutEdge(node.id, first, "branch", name) for name, first in node.branches.items()]
    if isinstance(node, ForEach):
        return [OutEdge(node.id, node.body, "body")]
    if isinstance(node, Await):
        out = [OutEdge(node.id, node.next, "signal")]
        if node.on_timeout is not None:
            out.append(OutEdge(node.id, node.on_timeout, "on_timeout"))
        return out
    return []
