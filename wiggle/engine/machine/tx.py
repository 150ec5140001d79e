"""One transition's working set: the locked instance, the tokens it touches, the events it logs.

A transition runs inside one database transaction. Tokens read or created during it live in an
identity map and are written back in one batch at `flush` (inserts as one multi-row INSERT),
so a linear step costs one UPDATE. A token read from a report carries a *fence*: extra WHERE
conditions (its lease, its state) checked by that same UPDATE, so a report that lost a race with
a reclaim or a timer changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Row, select

from wiggle.graph import ExecutionMode, Graph

from ..model.types import InstanceStatus, Json, TokenState
from ..store import schema as s
from ..store.db import Database
from ..store.inputs import Entry, RecordedInput, entered_column
from ..store.rows import TOKEN_COLUMNS, Inst, Tok, dumps, loads, new_id
from ..store.transition import FenceLost, Rows
from ..store.wakeups import Wakeups

__all__ = [
    "TOKEN_COLUMNS",
    "FenceLost",
    "Inst",
    "Tok",
    "Tx",
    "dumps",
    "loads",
    "new_id",
]


_NO_INPUT: Any = object()


class Tx:
    """The unit of work of one transition."""

    def __init__(
        self,
        conn: Connection,
        db: Database,
        now: int,
        graph_of: Callable[[Connection, str], Graph],
        default_mode: ExecutionMode = ExecutionMode.SERVER,
    ) -> None:
        self.conn = conn
        self.default_mode = default_mode
        self.db = db
        self.now = now
        self.graph_of = graph_of
        self.tokens: dict[str, Tok] = {}
        self._new: dict[str, Tok] = {}
        self._dirty: dict[str, Tok] = {}
        self._events: list[dict[str, Any]] = []
        # Events for the trace observers alone, never written (trace_note).
        self._notes: list[dict[str, Any]] = []
        # What this transaction made happen, for whoever waits for it (after the commit).
        self.wakeups = Wakeups()
        self.instances: dict[str, Inst] = {}
        # Instance rows waiting to be written (with the tokens, in the same statement).
        self._instance_inserts: dict[str, dict[str, Any]] = {}
        self._instance_updates: dict[str, dict[str, Any]] = {}
        # The input of each node a top-level token entered (the last visit per node), by
        # instance, written on the instance's last event (store/inputs.py); the inputs that
        # replace an instance's record (a migration's renames); and the search attribute values
        # that changed, written with the tokens.
        self._inputs: dict[str, dict[str, Entry]] = {}
        self._replaced: dict[str, dict[str, RecordedInput]] = {}
        self._search: dict[tuple[str, str], tuple[str | None, float | None] | None] = {}

    # -- tokens ---------------------------------------------------------------------------------

    def new_token(self, inst: Inst, node_id: str, context: Json, **fields: Any) -> Tok:
        tok = Tok(
            id=new_id(),
            instance_id=inst.id,
            version=inst.version,
            node_id=node_id,
            state=TokenState.WAITING,
            context=context,
            **fields,
        )
        self.tokens[tok.id] = tok
        self._new[tok.id] = tok
        return tok

    def adopt_values(self, values: Sequence[Any]) -> Tok:
        """`adopt` for a row given as the token's columns in table order."""
        known = self.tokens.get(values[0])
        if known is not None:
            return known
        tok = Tok.from_values(values)
        self.tokens[tok.id] = tok
        return tok

    def adopt(self, row: Row[Any]) -> Tok:
        """The in-memory token for a row read in this transaction (the map wins if known)."""
        known = self.tokens.get(row._mapping["id"])
        if known is not None:
            return known
        tok = Tok.from_row(row)
        self.tokens[tok.id] = tok
        return tok

    def load_token(self, token_id: str) -> Tok | None:
        if token_id in self.tokens:
            return self.tokens[token_id]
        row = self.conn.execute(select(*TOKEN_COLUMNS).where(s.tokens.c.id == token_id)).first()
        return None if row is None else self.adopt(row)

    def save(self, tok: Tok) -> None:
        if tok.id not in self._new:
            self._dirty[tok.id] = tok

    def entered(self, tok: Tok, input: Json = _NO_INPUT) -> None:
        """`tok` entered its node with its context (and, for a combine or apply step, `input`):
        kept as the node's last input, which a reset rewinds to. Tokens inside a parallel
        branch or a for_each body are not kept (a reset cannot target their nodes)."""
        if tok.parent_token_id is None:
            self.entered_at(tok.instance_id, tok.node_id, tok.context, tok.loop_counts, input)

    def entered_at(
        self,
        instance_id: str,
        node_id: str,
        context: Json,
        loop_counts: dict[str, int],
        input: Json = _NO_INPUT,
    ) -> None:
        """`entered` for a top-level token that reached `node_id` inside a worker's local run."""
        self._inputs.setdefault(instance_id, {})[node_id] = Entry(
            dumps(context), dumps(loop_counts), None if input is _NO_INPUT else dumps(input)
        )

    def replace_inputs(self, instance_id: str, inputs: dict[str, RecordedInput]) -> None:
        """From this transaction on, `inputs` are all the nodes' inputs the instance has (a
        migration renamed its nodes); written with its next event in this transaction."""
        self._replaced[instance_id] = inputs
        self._inputs.pop(instance_id, None)

    def search_values(self, instance_id: str, values: dict[str, Any]) -> None:
        """Search attribute values that changed: name -> (text, number), or None when the value
        is now absent (see search)."""
        for name, value in values.items():
            self._search[(instance_id, name)] = value

    def _take_search(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The search rows to write, once: the values set, and the keys of those now absent."""
        put: list[dict[str, Any]] = []
        gone: list[dict[str, Any]] = []
        for (instance_id, name), value in self._search.items():
            key = {"instance_id": instance_id, "name": name}
            if value is None:
                gone.append(key)
            else:
                put.append({**key, "text_value": value[0], "num_value": value[1]})
        self._search.clear()
        return put, gone

    def new_instance(self, row: dict[str, Any]) -> None:
        """A new instance row (every column of wiggle_instances), written at the next flush."""
        self._instance_inserts[row["id"]] = row

    def end_instance(self, inst: Inst, reason: str, context: Json, *, set_context: bool) -> None:
        """Record that `inst` ended with `inst.status` (written at the next flush). Code that
        reads an instance's status inside the transaction reads `tx.instances`, never the row."""
        pending = self._instance_inserts.get(inst.id)
        if pending is not None:  # not written yet: it is written as it ends (one statement
            # cannot update a row it inserts)
            pending.update(status=inst.status.value, reason=reason, updated_at_ms=self.now)
            if set_context:
                pending["context"] = dumps(context)
            return
        self._instance_updates[inst.id] = {
            "id": inst.id,
            "status": inst.status.value,
            "reason": reason,
            "updated_at_ms": self.now,
            "context": dumps(context) if set_context else None,
            "set_context": set_context,
        }

    def reopen_instance(self, inst: Inst) -> None:
        """A repaired instance runs again: status RUNNING, no reason (written at the next flush;
        its stored context stays until it ends again)."""
        self._instance_updates[inst.id] = {
            "id": inst.id,
            "status": InstanceStatus.RUNNING.value,
            "reason": "",
            "updated_at_ms": self.now,
            "context": None,
            "set_context": False,
        }

    def flush(self) -> None:
        """Write pending inserts and updates; FenceLost when a fenced UPDATE matched no row."""
        self._write(with_events=False)

    # -- events and wake-ups --------------------------------------------------------------------

    def event(
        self, instance_id: str, kind: str, node_id: str = "", attempt: int = 0, **detail: Any
    ) -> None:
        self._events.append(
            {
                "instance_id": instance_id,
                "at_ms": self.now,
                "kind": kind,
                "node_id": node_id,
                "attempt": attempt,
                "detail": dumps(detail),
                "entered": None,
            }
        )

    def trace_note(self, instance_id: str, kind: str, node_id: str, attempt: int) -> None:
        """What a span needs but history does not keep (a sleep or an await began: its span
        starts there), for the trace observers alone; nothing while there are none."""
        if self.db.trace_observers:
            self._notes.append(
                {
                    "instance_id": instance_id,
                    "at_ms": self.now,
                    "kind": kind,
                    "node_id": node_id,
                    "attempt": attempt,
                    "detail": "",
                }
            )

    def finish(self, *, commit: bool = False) -> None:
        """Flush tokens, append the events, queue the wake-ups (FenceLost: roll back).

        The wake-ups are handed to the database, which acts on them once the commit succeeded:
        no NOTIFY inside the transaction (PostgreSQL serialises the commits of notifying
        transactions on one global lock, which would defeat group commit).

        `commit`: this is the transaction's end, and on PostgreSQL its COMMIT is sent with the
        last write (one round trip fewer); the caller runs no statement after it."""
        self._put_inputs_on_events()
        if self.db.event_observers and self._events:
            self.db.logged(self.conn, [self._observed(ev) for ev in self._events])
        if self.db.trace_observers and (self._events or self._notes):
            traced = [self._traced(ev) for ev in (*self._events, *self._notes)]
            self.db.traced(self.conn, traced)
        self._write(with_events=True, commit=commit)
        if self.wakeups:
            self.db.after_commit(self.conn, self.wakeups)
            self.wakeups = Wakeups()

    def _observed(self, ev: dict[str, Any]) -> tuple[str, str, str, str]:
        inst = self.instances.get(ev["instance_id"])
        flow, mode = (inst.flow, inst.mode.value) if inst is not None else ("", "")
        return ev["kind"], flow, mode, ev["detail"]

    def _traced(self, ev: dict[str, Any]) -> dict[str, Any]:
        """An event with what a span of it needs: its instance tree's trace context."""
        inst = self.instances.get(ev["instance_id"])
        if inst is None:
            return {**ev, "root_id": ev["instance_id"], "flow": "", "version": ""}
        return {
            **ev,
            "root_id": inst.root_id,
            "flow": inst.flow,
            "version": inst.version,
            "mode": inst.mode.value,
            "parent_instance_id": inst.parent_instance_id or "",
            "traceparent": inst.traceparent or "",
            "tracestate": inst.tracestate or "",
        }

    def _write(self, *, with_events: bool, commit: bool = False) -> None:
        """Every pending row (and the events, `with_events`) through the database's one write
        (store/transition.py): one statement on PostgreSQL, a few on SQLite. NOTIFYs follow the
        commit. A fenced update that matches no row raises FenceLost: the caller rolls back,
        events and wake-ups included."""
        updates = []
        for tok in self._dirty.values():
            row = tok.row()
            for column, value in tok.fence.items():
                row[f"f_{column}"] = value
            tok.fence = {}
            updates.append(row)
        rows = Rows(
            token_inserts=[t.row() for t in self._new.values()],
            token_updates=updates,
            instance_updates=list(self._instance_updates.values()),
            instance_inserts=list(self._instance_inserts.values()),
        )
        rows.search_put, rows.search_gone = self._take_search()
        if with_events:
            rows.events, self._events = self._events, []
        self._new.clear()
        self._dirty.clear()
        self._instance_updates.clear()
        self._instance_inserts = {}
        self.db.write_rows(self.conn, rows, commit=commit)

    def _put_inputs_on_events(self) -> None:
        """Each instance's entered nodes on the last event it logs in this write (a transition
        that moves an instance logs an event for it). The inputs of an instance that logged
        none ride on an `inputs_recorded` event of their own, so none is ever lost."""
        if not self._inputs and not self._replaced:
            return
        last: dict[str, dict[str, Any]] = {ev["instance_id"]: ev for ev in self._events}
        for instance_id in dict.fromkeys([*self._inputs, *self._replaced]):
            if instance_id not in last:
                self.event(instance_id, "inputs_recorded")
                last[instance_id] = self._events[-1]
            entries = self._inputs.get(instance_id, {})
            last[instance_id]["entered"] = entered_column(entries, self._replaced.get(instance_id))
        self._inputs.clear()
        self._replaced.clear()
