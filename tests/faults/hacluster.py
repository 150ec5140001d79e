"""A highly available PostgreSQL cluster on this machine, as teams run one: three etcd members and
three PostgreSQL 15 nodes managed by Patroni, with HAProxy in front (Debian's packages:
etcd-server, patroni, postgresql-15, haproxy; scripts/setup.sh installs them).

Everything listens on 127.0.0.1 (ports picked free) and lives in one throwaway directory. As
root, Patroni and PostgreSQL run as pgserver's unprivileged `pgserver` user (PostgreSQL refuses
root), as pgpair.py does; etcd and HAProxy run as the caller.

Patroni's settings (`Settings`, the `bootstrap.dcs` section written to etcd at bootstrap):
`synchronous_mode` on, so a COMMIT is acknowledged only once a synchronous standby has it, and
only a synchronous standby may be promoted; `synchronous_mode_strict` when asked, so commits wait
rather than go on without any standby; `primary_start_timeout: 0`, so a crashed primary is
failed over at once instead of being restarted in place for up to 5 minutes; `ttl`, `loop_wait`
and `retry_timeout` short for a test's patience (10, 1, 4 s: the leader key lapses 10 s after
its holder stops renewing it, and a primary that cannot write it for 4 s demotes itself; Patroni
wants loop_wait + 2 x retry_timeout <= ttl). retry_timeout must outlast an etcd election (etcd's
defaults, kept here, replace a leader silent for 1 s within about 2 s): with 3 s, killing etcd's
leader made the primary demote itself and take the lead again, an outage of 5 s. HAProxy
sends each connection to the node whose Patroni answers `GET /primary` with 200 (checked every
0.5 s, down after two failures, up after one success, its sessions shut when marked down).

A partition, with `links=True`: each node's Patroni reaches etcd only through links of its own
(`use_proxies`, so it never looks past them), and the other nodes reach its PostgreSQL (to
stream) and its REST API (the leader race asks every member) only through its links (its
`connect_address`es). `isolate(node)` cuts them all (links.py): the node can no longer renew
the leader key, stream to its replicas or be asked, while Wiggle and HAProxy, which connect to
its real ports, still reach it. That is a network partition that leaves the primary on
Wiggle's side, the case where a demoted node must not take a commit.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
from faultkit import Proc, free_port, kill_postmaster
from links import Link
from pgpair import postgres_directory

from tests.waiting import wait_until

PG_BIN = Path("/usr/lib/postgresql/15/bin")
SCOPE = "wiggle"


@dataclass(frozen=True)
class Settings:
    """The Patroni settings the cluster bootstraps with (`bootstrap.dcs`)."""

    ttl: int = 10
    loop_wait: int = 1
    retry_timeout: int = 4
    maximum_lag_on_failover: int = 1_048_576
    synchronous_mode_strict: bool = False

    def dcs(self) -> dict[str, Any]:
        return {
            "ttl": self.ttl,
            "loop_wait": self.loop_wait,
            "retry_timeout": self.retry_timeout,
            "maximum_lag_on_failover": self.maximum_lag_on_failover,
            "primary_start_timeout": 0,
            "synchronous_mode": True,
            "synchronous_mode_strict": self.synchronous_mode_strict,
            "postgresql": {
                "use_pg_rewind": True,
                "use_slots": True,
                "parameters": {
                    "max_connections": 300,
                    "wal_keep_size": "256MB",
                    "max_wal_senders": 10,
                    "max_replication_slots": 10,
                    "fsync": "off",
                },
            },
        }


def _http(url: str, body: bytes | None = None, timeout: float = 2.0) -> Any:
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read() or b"null")


class Etcd:
    """One etcd member."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.dir = root / name
        self.client = free_port()
        self.peer = free_port()
        self.proc: Proc | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client}"

    def start(self, members: list[Etcd]) -> None:
        initial = ",".join(f"{m.name}=http://127.0.0.1:{m.peer}" for m in members)
        self.proc = Proc(
            [
                "etcd",
                f"--name={self.name}",
                f"--data-dir={self.dir}",
                f"--listen-client-urls=http://{self.endpoint}",
                f"--advertise-client-urls=http://{self.endpoint}",
                f"--listen-peer-urls=http://127.0.0.1:{self.peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.peer}",
                f"--initial-cluster={initial}",
                "--initial-cluster-state=new",
                f"--initial-cluster-token={SCOPE}-{os.getpid()}",
                "--logger=zap",
                "--log-level=warn",
            ]
        )

    def status(self) -> dict[str, Any]:
        """This member's id and the leader it knows (etcd's v3 gateway, maintenance/status)."""
        got = _http(f"http://{self.endpoint}/v3/maintenance/status", b"{}")
        return {"id": got["header"]["member_id"], "leader": got.get("leader")}

    def alive(self) -> bool:
        return self.proc is not None and self.proc.proc.poll() is None


class Node:
    """One PostgreSQL node and the Patroni that manages it."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.dir = root / name
        self.data = self.dir / "data"
        self.config = self.dir / "patroni.yml"
        self.port = free_port()
        self.rest = free_port()
        self.links: dict[str, Link] = {}  # "pg", "rest", and one per etcd member
        self.proc: Proc | None = None

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.rest}"

    def postmaster(self) -> int | None:
        try:
            with open(self.data / "postmaster.pid") as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return None
        return pid if psutil.pid_exists(pid) else None

    def patroni_alive(self) -> bool:
        return self.proc is not None and self.proc.proc.poll() is None


class HaCluster:
    """Three etcd members, three Patroni + PostgreSQL nodes and HAProxy; `close()` stops and
    removes everything."""

    def __init__(self, settings: Settings | None = None, *, links: bool = False) -> None:
        self.settings = settings or Settings()
        self.root, self.user = postgres_directory("wiggle-patroni-")
        self.sockets = self.root / "sockets"
        self.etcd = [Etcd(f"etcd{i}", self.root) for i in (1, 2, 3)]
        self.nodes = [Node(f"pg{i}", self.root) for i in (1, 2, 3)]
        self.haproxy: Proc | None = None
        self.haproxy_port = free_port()
        self._closed = False
        try:
            for member in self.etcd:
                member.start(self.etcd)
            wait_until(self._etcd_has_leader, 60, "etcd electing a leader", interval=0.2)
            for node in self.nodes:
                node.dir.mkdir()
                if links:
                    node.links = {"pg": Link(f"127.0.0.1:{node.port}")}
                    node.links["rest"] = Link(f"127.0.0.1:{node.rest}")
                    for member in self.etcd:
                        node.links[member.name] = Link(member.endpoint)
            self.sockets.mkdir()
            self._own(self.root)
            for node in self.nodes:
                self._write_config(node)
                self.start_patroni(node)
            wait_until(
                self.healthy, 120, "a leader and two replicas, one synchronous", interval=0.5
            )
            self._start_haproxy()
        except BaseException:
            self.close()
            raise

    # -- configuration --------------------------------------------------------------------------

    def _own(self, path: Path) -> None:
        if self.user:
            for where, dirs, files in os.walk(path):
                for name in [*dirs, *files]:
                    shutil.chown(Path(where) / name, self.user, self.user)
            shutil.chown(path, self.user, self.user)

    def _write_config(self, node: Node) -> None:
        link = node.links
        etcd_hosts = (
            [link[m.name].address for m in self.etcd] if link else [m.endpoint for m in self.etcd]
        )
        config = {
            "scope": SCOPE,
            "namespace": "/wiggle-test/",
            "name": node.name,
            "log": {"level": "INFO", "format": "%(asctime)s %(levelname)s: %(message)s"},
            "restapi": {
                "listen": f"127.0.0.1:{node.rest}",
                "connect_address": link["rest"].address if link else f"127.0.0.1:{node.rest}",
            },
            "etcd3": {"hosts": etcd_hosts, "use_proxies": bool(link)},
            "bootstrap": {
                "dcs": self.settings.dcs(),
                # Nothing here outlives the test, and no fault crashes the machine: what a
                # process kill leaves behind is in the kernel's cache either way.
                "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}, "no-sync"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.port}",
                "connect_address": link["pg"].address if link else f"127.0.0.1:{node.port}",
                "data_dir": str(node.data),
                "bin_dir": str(PG_BIN),
                "pgpass": str(node.dir / "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "replication": {"username": "replicator", "password": "replicator"},
                    "rewind": {"username": "rewinder", "password": "rewinder"},
                },
                "parameters": {"unix_socket_directories": str(self.sockets)},
                "basebackup": [{"checkpoint": "fast"}],
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
        }
        node.config.write_text(json.dumps(config, indent=1))  # JSON is YAML
        self._own(node.dir)

    # -- processes ------------------------------------------------------------------------------

    def start_patroni(self, node: Node) -> None:
        env = {"HOME": str(node.dir), "PATRONICTL_CONFIG_FILE": str(node.config)}
        node.proc = Proc(["patroni", str(node.config)], env=env, user=self.user)

    def _start_haproxy(self) -> None:
        servers = "\n".join(
            f"    server {n.name} 127.0.0.1:{n.port} maxconn 500 check port {n.rest}"
            for n in self.nodes
        )
        config = self.root / "haproxy.cfg"
        config.write_text(
            "global\n    maxconn 2000\n"
            "defaults\n    mode tcp\n    retries 2\n    timeout connect 2s\n"
            "    timeout client 30m\n    timeout server 30m\n    timeout check 2s\n"
            f"listen primary\n    bind 127.0.0.1:{self.haproxy_port}\n"
            "    option httpchk GET /primary\n    http-check expect status 200\n"
            "    default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions\n"
            f"{servers}\n"
        )
        self.haproxy = Proc(["haproxy", "-db", "-f", str(config)])
        wait_until(self._haproxy_routes, 30, "HAProxy routing to the primary", interval=0.2)

    def _haproxy_routes(self) -> bool:
        try:
            with psycopg.connect(self.haproxy_dsn("postgres"), connect_timeout=2) as conn:
                return not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
        except psycopg.Error:
            return False

    # -- what the cluster says ------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (`GET /cluster` of the first node that answers)."""
        for node in self.nodes:
            if not node.patroni_alive():
                continue
            with contextlib.suppress(OSError, ValueError):
                return list(_http(f"{node.api}/cluster")["members"])
        return []

    def role_of(self, role: str) -> list[Node]:
        names = {m["name"] for m in self.members() if m.get("role") == role}
        return [n for n in self.nodes if n.name in names]

    def leader(self) -> Node | None:
        found = self.role_of("leader")
        return found[0] if found else None

    def healthy(self, replicas: int = 2) -> bool:
        """A running leader, `replicas` running replicas, one of them the synchronous standby."""
        members = self.members()
        running = [m for m in members if m.get("state") == "running"]
        roles = sorted(m.get("role", "") for m in running)
        return (
            roles.count("leader") == 1
            and "sync_standby" in roles
            and len(running) == replicas + 1
            and all(m.get("lag", 0) in (0, "unknown") or m["role"] == "leader" for m in running)
        )

    def _etcd_has_leader(self) -> bool:
        try:
            return all(m.status()["leader"] for m in self.etcd if m.alive())
        except (OSError, ValueError, KeyError):
            return False

    def etcd_leader(self) -> Etcd | None:
        """The live etcd member that leads (None while they elect one)."""
        for member in self.etcd:
            if not member.alive():
                continue
            with contextlib.suppress(OSError, ValueError, KeyError):
                got = member.status()
                if got["id"] == got["leader"]:
                    return member
        return None

    # -- how Wiggle connects --------------------------------------------------------------------

    def url(self, database: str) -> str:
        """The multi-host URL the docs tell users to write: every node, read-write wanted."""
        hosts = "&".join(f"host=127.0.0.1:{n.port}" for n in self.nodes)
        return f"postgresql+psycopg://postgres@/{database}?{hosts}&target_session_attrs=read-write"

    def haproxy_url(self, database: str) -> str:
        """HAProxy's one address, which follows the primary by Patroni's health check."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.haproxy_port}/{database}"

    def haproxy_dsn(self, database: str) -> str:
        return f"host=127.0.0.1 port={self.haproxy_port} user=postgres dbname={database}"

    def create_database(self, name: str) -> None:
        leader = self.leader()
        assert leader is not None
        with psycopg.connect(
            host="127.0.0.1", port=leader.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    # -- faults ---------------------------------------------------------------------------------

    def kill_postgres(self, node: Node) -> int:
        """kill -9 the node's postmaster and every backend (its Patroni lives on)."""
        pid = node.postmaster()
        assert pid is not None, f"{node.name} runs no PostgreSQL"
        return kill_postmaster(pid)

    def kill_node(self, node: Node) -> int:
        """kill -9 the node's Patroni, its postmaster and every backend at once: the machine
        gone. Its leader key is left in etcd to lapse."""
        assert node.proc is not None
        _kill_all(_node_processes(node))
        node.proc.proc.wait(30)
        return node.proc.pid

    def stop_node(self, node: Node) -> None:
        """A planned stop: SIGTERM to Patroni, which stops its PostgreSQL first."""
        assert node.proc is not None
        node.proc.stop(timeout=60)

    def patronictl(self, *args: str) -> str:
        """`patronictl` as an operator runs it, with the first live node's configuration."""
        node = next(n for n in self.nodes if n.patroni_alive())
        done = subprocess.run(
            ["patronictl", "-c", str(node.config), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"patronictl {' '.join(args)}: {done.stderr or done.stdout}")
        return done.stdout

    def switchover(self, leader: Node, candidate: Node) -> str:
        return self.patronictl(
            "switchover", SCOPE, "--leader", leader.name, "--candidate", candidate.name, "--force"
        )

    def isolate(self, node: Node) -> None:
        """Cut the node off from etcd and from the other nodes (needs `links=True`)."""
        assert node.links, "the cluster was started without links"
        for link in node.links.values():
            link.cut()

    def heal(self, node: Node) -> None:
        for link in node.links.values():
            link.mend()

    def kill_etcd(self, member: Etcd) -> int:
        assert member.proc is not None
        return member.proc.kill9()

    # -- the end --------------------------------------------------------------------------------

    def logs(self) -> str:
        """The last lines of every Patroni's log, for a failure's message."""
        return "\n".join(
            f"== {n.name}\n" + "".join(n.proc.lines[-30:]) for n in self.nodes if n.proc
        )

    def __enter__(self) -> HaCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Everything killed -9 at once: nothing here is kept, and a polite stop of each node
        in turn would only fail the cluster over from one to the next."""
        if self._closed:
            return
        self._closed = True
        victims = [p for node in self.nodes for p in _node_processes(node)]
        for proc in [self.haproxy, *(m.proc for m in self.etcd)]:
            if proc is not None and proc.proc.poll() is None:
                victims.append(psutil.Process(proc.pid))
        _kill_all(victims)
        for proc in [self.haproxy, *(m.proc for m in self.etcd), *(n.proc for n in self.nodes)]:
            if proc is not None:
                proc.proc.wait(30)
        for node in self.nodes:
            for link in node.links.values():
                link.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _node_processes(node: Node) -> list[psutil.Process]:
    """The node's Patroni (when it runs), its postmaster and every backend."""
    found = []
    with contextlib.suppress(psutil.NoSuchProcess):
        if node.patroni_alive():
            assert node.proc is not None
            found.append(psutil.Process(node.proc.pid))
        pid = node.postmaster()
        if pid is not None:
            found += [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return found


def _kill_all(victims: list[psutil.Process]) -> None:
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=30)
