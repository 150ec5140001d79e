"""A PostgreSQL primary and a synchronous streaming standby on this machine, from the `pgserver`
package's binaries (initdb, pg_ctl, pg_basebackup; as root they run as its `pgserver` user).

The primary listens on 127.0.0.1:`ports[0]`, the standby on 127.0.0.1:`ports[1]`, streaming from
it as `standby1`, the primary's one synchronous standby (`synchronous_commit = on`): a COMMIT is
acknowledged only once the standby has flushed it. `url(db)` is the multi-host URL that follows the
primary (`target_session_attrs=read-write`). `crash_primary()` kills the primary's postmaster
and every backend with SIGKILL; `promote()` turns the standby into the primary and lets it commit
without a synchronous standby of its own; `stop_standby()` leaves the primary's commits waiting
for a standby until `start_standby()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg

from tests.waiting import wait_until


def _bin() -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH  # type: ignore[import-untyped]
    return Path(POSTGRES_BIN_PATH)


def _free_port() -> int:
    from wiggle._ports import free_port

    return free_port()


_PRIMARY_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockets}'
wal_level = replica
max_wal_senders = 4
max_connections = 200
synchronous_standby_names = 'standby1'
synchronous_commit = on
hot_standby = on
wal_keep_size = '256MB'
fsync = on
"""


def postgres_directory(prefix: str) -> tuple[Path, str | None]:
    """A new temporary directory PostgreSQL may run in, and the user to run it as: as root,
    pgserver's unprivileged `pgserver` user (created when missing; PostgreSQL refuses to run as
    root), who owns the directory and can reach it; else None, the caller."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    if os.geteuid() != 0:
        return root, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.utils import (  # type: ignore[import-untyped]
            ensure_prefix_permissions,
            ensure_user_exists,
        )
    user = "pgserver"
    ensure_user_exists(user)
    ensure_prefix_permissions(root)
    shutil.chown(root, user, user)
    return root, user


class PostgresPair:
    def __init__(self) -> None:
        self.root, self.user = postgres_directory("wiggle-pgpair-")
        self.primary = self.root / "primary"
        self.standby = self.root / "standby"
        self.sockets = self.root / "sockets"
        self.ports = (_free_port(), _free_port())
        self._run("mkdir", "-p", str(self.sockets))
        self._pg("initdb", "-D", str(self.primary), "--auth=trust", "-U", "postgres", "-E", "utf8")
        with open(self.primary / "postgresql.conf", "a") as conf:
            conf.write(_PRIMARY_CONF.format(port=self.ports[0], sockets=self.sockets))
        self._start(self.primary)
        self._pg(
            "pg_basebackup",
            "-D",
            str(self.standby),
            "-d",
            f"host=127.0.0.1 port={self.ports[0]} user=postgres",
            "-X",
            "stream",
        )
        (self.standby / "standby.signal").touch()
        if self.user:
            shutil.chown(self.standby / "standby.signal", self.user, self.user)
        with open(self.standby / "postgresql.auto.conf", "a") as conf:
            conf.write(
                f"port = {self.ports[1]}\n"
                f"primary_conninfo = 'host=127.0.0.1 port={self.ports[0]} user=postgres "
                "application_name=standby1'\n"
            )
        self._start(self.standby)
        wait_until(self._synchronous, 60, "the standby streaming synchronously")

    # -- processes ------------------------------------------------------------------------------

    def _run(self, *args: str) -> str:
        done = subprocess.run(args, capture_output=True, text=True, user=self.user, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr or done.stdout}")
        return done.stdout

    def _pg(self, tool: str, *args: str) -> str:
        return self._run(str(_bin() / tool), *args)

    def _start(self, data: Path) -> None:
        self._pg("pg_ctl", "-D", str(data), "-l", str(data / "log"), "-w", "-t", "60", "start")

    def postmaster(self, data: Path) -> int:
        with open(data / "postmaster.pid") as f:
            return int(f.readline())

    # -- what a scenario does -------------------------------------------------------------------

    def admin(self, port: int, database: str = "postgres") -> Any:
        return psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", dbname=database, autocommit=True
        )

    def _synchronous(self) -> bool:
        with self.admin(self.ports[0]) as conn:
            rows = conn.execute(
                "SELECT application_name, sync_state FROM pg_stat_replication"
            ).fetchall()
        return ("standby1", "sync") in rows

    def create_database(self, name: str) -> None:
        with self.admin(self.ports[0]) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def url(self, database: str) -> str:
        hosts = "&".join(f"host=127.0.0.1:{port}" for port in self.ports)
        return f"postgresql+psycopg://postgres@/{database}?{hosts}&target_session_attrs=read-write"

    def crash_primary(self) -> int:
        """SIGKILL the primary's postmaster and every backend at once."""
        from faultkit import kill_postmaster

        return kill_postmaster(self.postmaster(self.primary))

    def promote(self) -> float:
        """Promote the standby; returns when it accepts writes (time.monotonic()).

        What a failover manager does besides `pg_ctl promote`: the promoted standby inherited
        `synchronous_standby_names` from the primary's configuration, and with no standby of
        its own every COMMIT would wait for one forever; until a new standby is attached it
        runs without (docs/scaling.md, "The hand-made promotion")."""
        self._pg("pg_ctl", "-D", str(self.standby), "-w", "-t", "60", "promote")
        with self.admin(self.ports[1]) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = ''")
            conn.execute("SELECT pg_reload_conf()")

        def writable() -> bool:
            try:
                with self.admin(self.ports[1]) as conn:
                    return not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
            except psycopg.Error:
                return False

        wait_until(writable, 60, "the promoted standby accepting writes")
        return time.monotonic()

    def stop_standby(self) -> None:
        """Stop the standby (a fast shutdown): the primary's commits then wait for it."""
        self._pg("pg_ctl", "-D", str(self.standby), "-m", "fast", "-w", "-t", "60", "stop")

    def start_standby(self) -> None:
        self._start(self.standby)

    def close(self) -> None:
        for data in (self.standby, self.primary):
            if (data / "postmaster.pid").exists():
                with contextlib.suppress(RuntimeError):  # already down
                    self._pg("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
