"""The engine's human tasks (docs/human-tasks.md): listing, showing, claiming and answering
them. Mixed into `Engine`; each call is one transaction, every action under the lock of the
task's instance (engine/ops/tasks.py)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, select

from .model.types import Json
from .ops import tasks as _tasks
from .ops.context import OpsContext
from .reads import tasks as _task_reads
from .reads.tasks import TaskAnswer, TaskView
from .store.db import Database

__all__ = ["Tasks"]


class Tasks:
    """What `Engine` does with human tasks. It provides `db` and `ops`.

    `person` is who acts (a credential's name on the server), `groups` the groups they are a
    member of; `admin` may see and act on any task, exclusions and claims aside."""

    db: Database
    ops: OpsContext

    def _now_ms(self, conn: Connection) -> int:
        return int(conn.execute(select(self.db.now)).scalar_one())

    def list_tasks(
        self,
        person: str,
        groups: Sequence[str] = (),
        *,
        admin: bool = False,
        states: Sequence[str] = ("OPEN", "CLAIMED"),
        instance_id: str | None = None,
        limit: int = 100,
    ) -> list[TaskView]:
        """The tasks in `states` that `person` may act on or acted on (an admin: all of
        them), soonest due first."""
        return self.db.read(
            lambda c: _task_reads.list_tasks(
                c,
                self._now_ms(c),
                person,
                groups,
                admin=admin,
                states=states,
                instance_id=instance_id,
                limit=limit,
            )
        )

    def show_task(
        self, task_id: str, person: str, groups: Sequence[str] = (), *, admin: bool = False
    ) -> TaskView:
        """One task with its audit trail (`actions`)."""
        return self.db.read(
            lambda c: _task_reads.show(c, self._now_ms(c), task_id, person, groups, admin=admin)
        )

    def claim_task(
        self,
        task_id: str,
        person: str,
        groups: Sequence[str] = (),
        *,
        admin: bool = False,
        request_id: str | None = None,
    ) -> TaskAnswer:
        return self.db.write(
            lambda c: _tasks.claim(
                self.ops, c, task_id, person, groups, admin=admin, request_id=request_id
            )
        )

    def unclaim_task(
        self,
        task_id: str,
        person: str,
        groups: Sequence[str] = (),
        *,
        admin: bool = False,
        request_id: str | None = None,
    ) -> TaskAnswer:
        return self.db.write(
            lambda c: _tasks.unclaim(
                self.ops, c, task_id, person, groups, admin=admin, request_id=request_id
            )
        )

    def reassign_task(
        self,
        task_id: str,
        to: str,
        by: str,
        *,
        admin: bool = False,
        request_id: str | None = None,
    ) -> TaskAnswer:
        return self.db.write(
            lambda c: _tasks.reassign(
                self.ops, c, task_id, to, by, admin=admin, request_id=request_id
            )
        )

    def complete_task(
        self,
        task_id: str,
        person: str,
        groups: Sequence[str] = (),
        answer: Json = None,
        *,
        request_id: str | None = None,
        admin: bool = False,
    ) -> TaskAnswer:
        """`person` answers the task (see engine/ops/tasks.py `complete`)."""
        return self.db.write(
            lambda c: _tasks.complete(
                self.ops, c, task_id, person, groups, answer, request_id=request_id, admin=admin
            )
        )
