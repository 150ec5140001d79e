"""The engine's definitions: registering compiled flows, reading them back, their parsed
graphs (cached: versions are immutable) and their input schemas. Mixed into `Engine`."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError

from wiggle.errors import DefinitionNotFound, InputRejected
from wiggle.graph import Graph

from .model.types import Json, StoredDefinition
from .store import schema as s
from .store.db import Database

__all__ = ["Definitions"]

_d = s.definitions


class Definitions:
    """What `Engine` knows of flows. It provides `db` and the two caches below."""

    db: Database
    _graphs: dict[str, Graph]
    _validators: dict[str, Any]

    # -- definitions ----------------------------------------------------------------------------

    def graph_of(self, conn: Connection, version: str) -> Graph:
        """The parsed graph of a version, cached: versions are immutable."""
        graph = self._graphs.get(version)
        if graph is None:
            canonical = conn.execute(select(_d.c.canonical).where(_d.c.version == version)).scalar()
            if canonical is None:
                raise DefinitionNotFound("?", version)
            graph = Graph.from_json(orjson.loads(canonical), version)
            self._graphs[version] = graph
        return graph

    def register(self, flow: Any) -> tuple[str, bool]:
        """Store a CompiledFlow; registering a known version is a no-op (created False)."""

        def fn(conn: Connection) -> bool:
            if conn.execute(select(_d.c.seq).where(_d.c.version == flow.version)).first():
                return False
            now = int(conn.execute(select(self.db.now)).scalar_one())
            conn.execute(
                _d.insert().values(
                    version=flow.version,
                    name=flow.name,
                    canonical=bytes(flow.canonical),
                    registered_at_ms=now,
                )
            )
            return True

        try:
            created = self.db.write(fn)
        except IntegrityError:
            # Another engine registered the same version just now, or something else collided
            # (a definitions sequence behind its rows): then the version is not stored.
            stored = self.db.read(
                lambda c: c.execute(select(_d.c.seq).where(_d.c.version == flow.version)).first()
            )
            if stored is None:
                raise
            created = False
        self._graphs.setdefault(flow.version, flow.graph)
        return flow.version, created

    def get_definition(self, name: str, version: str | None = None) -> StoredDefinition:
        def fn(conn: Connection) -> Any:
            q = select(_d.c.name, _d.c.version, _d.c.canonical, _d.c.registered_at_ms)
            if version:
                q = q.where(_d.c.version == version, _d.c.name == name)
            else:
                q = q.where(_d.c.name == name).order_by(_d.c.seq.desc()).limit(1)
            return conn.execute(q).first()

        row = self.db.read(fn)
        if row is None:
            raise DefinitionNotFound(name, version)
        from wiggle.compiler import graph_from_canonical  # the compiler is optional at import

        canonical = bytes(row.canonical)
        return StoredDefinition(
            row.name,
            row.version,
            canonical,
            int(row.registered_at_ms),
            graph_from_canonical(canonical),
        )

    def _check_input(self, graph: Graph, value: Json) -> None:
        if graph.input_schema is None:
            return
        # Loaded when a flow first declares an input schema: a tenth of a server's start.
        import jsonschema  # type: ignore[import-untyped]

        validator = self._validators.get(graph.version)
        if validator is None:
            cls = jsonschema.validators.validator_for(graph.input_schema)
            validator = cls(graph.input_schema)
            self._validators[graph.version] = validator
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = (
                "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else ""
            )
            raise InputRejected(
                f"input rejected by flow {graph.name!r}{' at ' + where if where else ''}: "
                f"{error.message}"
            )
