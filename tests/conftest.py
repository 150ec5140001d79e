"""Shared fixtures and the suite's scheduling.

`postgres_url` is WIGGLE_TEST_POSTGRES_URL when set, else a throwaway server started from the
`pgserver` package in a temporary directory (as root, pgserver runs the server as its own
`pgserver` system user, which it creates). Never skipped: a machine without PostgreSQL still
runs the PostgreSQL half of every suite. A throwaway server runs without fsync: nothing on it
outlives the session, and CREATE DATABASE then takes about 0.2 s of the server's CPU rather than
half a second of waiting on disk (tests/databases.py recycles databases so that few tests pay even
that). Its behaviour is PostgreSQL's own in every other way (the
fault suite's crash test starts a server of its own, with the defaults, to kill).

`database_url` is parametrised over ["sqlite", "postgres"]: a SQLite file under tmp_path, or an
empty PostgreSQL database (one a test of the same process had is emptied and taken again:
tests/databases.py; for a test whose `engine` or `stack` fixture opens an engine on it, one that
already holds the schema that engine would create, with nothing in it). `durable_database_url`
is the same on a second server with PostgreSQL's default settings, for what counts WAL syncs.

`go_worker` and `java_worker` are the commands that start the Go and Java SDKs' conformance
workers, built when missing or older than their sources (scripts/test.sh builds them first);
the Java one maps a class-data-sharing archive of the jar, trained once per build (tests/jvm.py).

Under pytest-xdist (`-n`, as scripts/test.sh runs the suite), each process has its own session
and so its own PostgreSQL server; the tests of a module with a module-scoped fixture (a stack, a
browser, a fleet of workers) run in one process, so that fixture is built once; and the longest
tests are handed out first, so none of them starts last and holds the run up on its own. A test
that uses a PostgreSQL server is marked `postgres` (`-m "not postgres"` leaves them out). At the
end come the fault suite's ledger table, when fault scenarios ran, the ten slowest tests
(setup, call and teardown together), and the ten that took the most CPU (on two cores the whole
run is bound by CPU, so these are what make it long); WIGGLE_TEST_CPU_REPORT=FILE writes both
figures of every test to FILE (CPU seconds, seconds, test, when it began in seconds into the run
and the xdist process that ran it; tab-separated).
"""

from __future__ import annotations

import fcntl
import os
import resource
import shlex
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.databases import Databases
from wiggle._postgres import postgres_server

ROOT = Path(__file__).resolve().parents[1]

#: Settings of a throwaway server that only durability across an operating-system crash needs.
_THROWAWAY_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def _tune_throwaway(url: str) -> None:
    import psycopg
    from sqlalchemy import make_url

    libpq = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(libpq, autocommit=True) as conn:
        for name, value in _THROWAWAY_SETTINGS.items():
            conn.execute(f"ALTER SYSTEM SET {name} = {value}")
        conn.execute("SELECT pg_reload_conf()")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A URL of a PostgreSQL database this session may create databases from."""
    ours = not os.environ.get("WIGGLE_TEST_POSTGRES_URL")
    with postgres_server() as url:
        if ours:
            _tune_throwaway(url)
        yield url


@pytest.fixture(scope="session")
def durable_postgres_url() -> Iterator[str]:
    """A PostgreSQL server with its default, durable settings, for what counts WAL flushes (a
    benchmark's figures): WIGGLE_TEST_POSTGRES_URL when set, else a second throwaway server."""
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_databases(postgres_url: str) -> Iterator[Databases]:
    """Empty databases on `postgres_url`'s server, recycled between tests (tests/databases.py)."""
    databases = Databases(postgres_url)
    yield databases
    databases.close()


@pytest.fixture(scope="session")
def durable_postgres_databases(durable_postgres_url: str) -> Iterator[Databases]:
    """The same on `durable_postgres_url`'s server."""
    databases = Databases(durable_postgres_url)
    yield databases
    databases.close()


#: The fixtures that open an engine (the default profile) on `database_url` before the test
#: begins: a test that uses one gets a PostgreSQL database holding the schema that engine would
#: create, empty (tests/databases.py: creating it was most of such a test's PostgreSQL CPU).
_OPEN_AN_ENGINE = frozenset({"engine", "stack"})


@contextmanager
def _fresh_database(request: pytest.FixtureRequest, tmp_path: Path, pool: str) -> Iterator[str]:
    """A SQLite file under tmp_path, or an empty database from the PostgreSQL databases of
    fixture `pool`, by the test's parameter (primed with the schema for a test that opens an
    engine on it first)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'wiggle.db'}"
        return
    databases: Databases = request.getfixturevalue(pool)
    with databases.fresh(primed=bool(_OPEN_AN_ENGINE & set(request.fixturenames))) as url:
        yield url


_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=_BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database per test, on each backend."""
    with _fresh_database(request, tmp_path, "postgres_databases") as url:
        yield url


@pytest.fixture(params=_BACKENDS)
def durable_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """`database_url` on a PostgreSQL server that syncs its WAL (`durable_postgres_url`)."""
    with _fresh_database(request, tmp_path, "durable_postgres_databases") as url:
        yield url


@pytest.fixture
def postgres_database_url(postgres_databases: Databases) -> Iterator[str]:
    """A fresh, empty PostgreSQL database, for behaviour only PostgreSQL has (row locks, NOTIFY)."""
    with postgres_databases.fresh() as url:
        yield url


# -- the Go and Java conformance workers ----------------------------------------------------------

GO_SDK = ROOT / "sdk/go"
JAVA_SDK = ROOT / "sdk/java"
TS_SDK = ROOT / "sdk/typescript"
JAVA_JAR = JAVA_SDK / "target/wiggle-conformance-worker.jar"
#: C1 only and the serial collector: a worker the corpus restarts a dozen times per session starts
#: in about half the time, and leaves the cores to the server and the cases.
JAVA_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def _newest(*roots: Path) -> float:
    """The last change to a file of `roots` (each a file or a directory tree)."""
    files = [p for root in roots for p in ([root] if root.is_file() else root.rglob("*"))]
    return max((p.stat().st_mtime for p in files if p.is_file()), default=0.0)


def _built(target: Path, sources: tuple[Path, ...], build: list[str], cwd: Path) -> Path:
    """`target`, built by `build` unless it is newer than every file of `sources`. One build at a
    time across test processes (xdist): the others wait for it and find it fresh."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists() or target.stat().st_mtime < _newest(*sources):
            subprocess.run(build, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return target


@pytest.fixture(scope="session")
def go_worker_binary() -> Path:
    """sdk/go's conformance worker (sdk/go/bin/wiggle-conformance-worker)."""
    assert shutil.which("go"), "Go is needed to build sdk/go"
    out = GO_SDK / "bin/wiggle-conformance-worker"
    build = ["go", "build", "-o", str(out), "./cmd/wiggle-conformance-worker"]
    sources = tuple(p for p in GO_SDK.iterdir() if p.name != "bin")
    return _built(out, sources, build, GO_SDK)


@pytest.fixture(scope="session")
def java_worker_jar() -> Path:
    """sdk/java's conformance worker jar (its classes generated from spec/proto at build time)."""
    mvn = shutil.which("mvn")
    assert mvn, "Maven is needed to build sdk/java (bash scripts/setup.sh installs it)"
    build = [mvn, "-q", "-B", "-f", str(JAVA_SDK / "pom.xml"), "-DskipTests", "package"]
    sources = (JAVA_SDK / "src/main", JAVA_SDK / "pom.xml", ROOT / "spec/proto")
    return _built(JAVA_JAR, sources, build, ROOT)


@pytest.fixture(scope="session")
def typescript_worker_script() -> Path:
    """sdk/typescript's conformance worker (dist/esm/bin/wiggle-conformance-worker.js)."""
    npm = shutil.which("npm")
    assert npm, "npm is needed to build sdk/typescript (bash scripts/setup.sh installs it)"
    out = TS_SDK / "dist/esm/bin/wiggle-conformance-worker.js"
    sources = (TS_SDK / "src", TS_SDK / "package.json", TS_SDK / "scripts", ROOT / "spec/proto")
    return _built(out, sources, [npm, "run", "-s", "build"], TS_SDK)


@pytest.fixture(scope="session")
def typescript_worker(typescript_worker_script: Path) -> str:
    """The command line of the TypeScript conformance worker."""
    return shlex.join(["node", str(typescript_worker_script)])


@pytest.fixture(scope="session")
def go_worker(go_worker_binary: Path) -> str:
    """The command line of the Go conformance worker."""
    return shlex.quote(str(go_worker_binary))


@pytest.fixture(scope="session")
def java_worker(java_worker_jar: Path) -> str:
    """The command line of the Java conformance worker, with its class-data-sharing archive
    (tests/jvm.py: a start takes about half as long, and the corpus starts it often)."""
    from tests.jvm import java_class_archive

    java = ["java", *JAVA_FLAGS]
    archive = java_class_archive(java_worker_jar, java)
    return shlex.join([*java, f"-XX:SharedArchiveFile={archive}", "-jar", str(java_worker_jar)])


# -- scheduling under xdist ----------------------------------------------------------------------

#: The whole-corpus runs (tests/conformance/test_corpus.py), one process per database: each is
#: a minute of timed cases (400 ms leases, retry delays) that more than two at once on two cores
#: can spoil.
_CORPUS = "tests/conformance/test_corpus.py::test_corpus["

#: The corpus under the distributed database profile (the fault suite): one more whole-corpus
#: run on PostgreSQL, so it queues behind the others on PostgreSQL.
_PROFILE_CORPUS = "tests/faults/test_distributed_corpus.py::"

#: Handed out first, longest first: each takes from half a minute to a minute or more, mostly
#: waiting (timers, leases, sleeps), and overlaps well with everything else.
LONG_FIRST = (
    _CORPUS,
    "tests/acceptance/test_docs_run.py",
    "tests/conformance/test_negative_controls.py",
    "tests/integration/fleet/",
    "tests/integration/definitions/",
    "tests/faults/",
    "tests/acceptance/",
    "tests/browser/",
)

#: The modules with a module-scoped fixture (a stack, a browser, a fleet of workers, certificates):
#: each runs whole in one process, so the fixture is built once. Collection fails when a module
#: with such a fixture is missing here.
SHARED_FIXTURE_MODULES = frozenset(
    {
        "tests/browser/test_console.py",
        "tests/browser/test_console_repair.py",
        "tests/browser/test_console_restart.py",
        "tests/browser/test_console_tasks.py",
        "tests/browser/test_console_truth.py",
        "tests/conformance/test_negative_controls_typescript.py",
        "tests/integration/definitions/test_definitions_modes.py",
        "tests/integration/fleet/test_java_tls.py",
        "tests/integration/fleet/test_mixed_fleet.py",
        "tests/integration/fleet/test_traces.py",
        "tests/integration/lsp/test_lsp.py",
        "tests/integration/server/test_server_tls.py",
        "tests/integration/server/test_server_tracing.py",
        "tests/integration/test_recycled_databases.py",
    }
)

_SHARED_SCOPES = frozenset({"module", "package", "class"})


def _group(nodeid: str) -> str:
    """The unit of work `nodeid` is sent to a process in (xdist's scope): itself, unless it
    shares a module's fixture or is a corpus run."""
    if nodeid.startswith(_CORPUS):
        return "corpus-" + nodeid.rsplit("-", 1)[-1].rstrip("]")
    if nodeid.startswith(_PROFILE_CORPUS):
        return "corpus-postgres"
    module = nodeid.split("::", 1)[0]
    return module if module in SHARED_FIXTURE_MODULES else nodeid


def _rank(nodeid: str) -> int:
    for n, prefix in enumerate(LONG_FIRST):
        if nodeid.startswith(prefix):
            return n
    return len(LONG_FIRST)


def _shares_a_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope in _SHARED_SCOPES for defs in info.name2fixturedefs.values() for d in defs)


#: The marks of tests that only a suite's whole run includes, each with the variable its
#: command sets to "full": `full_only(covered_by)`, scripts/faults.sh; `corpus_full(covered_by)`,
#: scripts/corpus.sh (covered_by names the test of scripts/test.sh that checks the same rule);
#: `acceptance_full`, the PostgreSQL half of most CLI tests (tests/acceptance/conftest.py).
FULL_ONLY_MARKS = {
    "full_only": "WIGGLE_FAULTS",
    "corpus_full": "WIGGLE_CORPUS",
    "acceptance_full": "WIGGLE_ACCEPTANCE",
}


def _full_only(item: pytest.Item) -> bool:
    return any(
        item.get_closest_marker(mark) is not None and os.environ.get(variable, "") != "full"
        for mark, variable in FULL_ONLY_MARKS.items()
    )


@pytest.hookimpl(tryfirst=True)  # the marks it adds must be there when `-m` selects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    left_out = [item for item in items if _full_only(item)]
    if left_out:
        items[:] = [item for item in items if not _full_only(item)]
        config.hook.pytest_deselected(items=left_out)
    items.sort(key=lambda item: _rank(item.nodeid))  # stable: file order within a rank
    unlisted: set[str] = set()
    for item in items:
        if {"postgres_url", "durable_postgres_url"} & set(item.fixturenames):
            item.add_marker(pytest.mark.postgres)
        module = item.nodeid.split("::", 1)[0]
        if module not in SHARED_FIXTURE_MODULES and _shares_a_fixture(item):
            unlisted.add(module)
    if unlisted:
        raise pytest.UsageError(
            "these modules have a module-scoped fixture: add them to SHARED_FIXTURE_MODULES in "
            "tests/conftest.py: " + ", ".join(sorted(unlisted))
        )


class _Scheduling:
    """`-n N` (xdist's default `load` distribution), with the tests of each group (`_group`)
    sent to one process together, in collection order (LONG_FIRST)."""

    @pytest.hookimpl
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "load":
            return None  # an explicit --dist is left alone
        from xdist.scheduler import LoadScopeScheduling

        class Grouped(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return _group(nodeid)

        config.option.loadscopereorder = False  # keep LONG_FIRST's order
        return Grouped(config, log)


def take_back_interrupt() -> None:
    """Let Ctrl-C reach the commands the suite starts, even when the suite itself was started
    with SIGINT ignored.

    A shell that runs a job in the background without job control (`bash scripts/test.sh &` in a
    script, nohup, some CI runners) starts it with SIGINT ignored, and an ignored signal is the
    one disposition that survives exec: every server, worker and `wiggle run --console` the tests
    start would inherit it, and the tests that stop them as a person would, with a SIGINT, would
    wait for them in vain (a clean clone's run failed so: two doc runs and the console test).
    With a handler of its own here, the suite's children start with SIGINT at its default again,
    as from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    take_back_interrupt()  # in the controller and in each xdist process
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_Scheduling(), "wiggle-scheduling")


# -- what the suite prints at the end ----------------------------------------------------------

SLOWEST_SHOWN = 10
#: ... once a run has this many tests (a run of a few files needs no such list).
SHOWN_AFTER_TESTS = 100
_SECONDS: dict[str, float] = defaultdict(float)
#: CPU seconds per test: its process (and the servers it runs in threads) and the subprocesses
#: it waited for (workers, CLI commands). A PostgreSQL server's own CPU is not counted.
CPU_PROPERTY = "cpu-seconds"
_CPU: dict[str, float] = defaultdict(float)
#: The fault suite's ledger lines (tests/faults/conftest.py), each a dict of a Tally's fields.
FAULT_LEDGER_PROPERTY = "fault-ledger"
_TALLIES: list[dict[str, Any]] = []
_TALLY_COLUMNS = (
    ("scenario", "scenario"),
    ("started", "started"),
    ("completed", "completed"),
    ("failed", "failed"),
    ("stuck", "stuck"),
    ("lost", "lost"),
    ("re-executions", "reexec"),
    ("stale refused", "stale_refused"),
    ("dup events", "duplicate_events"),
    ("timers", "timers_fired"),
    ("fault", "fault"),
)


def _cpu_now() -> float:
    mine = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + waited.ru_utime + waited.ru_stime


_CPU_BEGAN: dict[str, float] = {}
#: When each test began (epoch seconds) and in which process: the report file's timeline.
BEGAN_PROPERTY = "began-at"
_BEGAN: dict[str, tuple[float, str]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _CPU_BEGAN[item.nodeid] = _cpu_now()
    item.user_properties.append(
        (BEGAN_PROPERTY, (time.time(), os.environ.get("PYTEST_XDIST_WORKER", "main")))
    )
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    outcome = yield
    began = _CPU_BEGAN.pop(item.nodeid, None) if call.when == "teardown" else None
    if began is not None:  # on the last report, which xdist sends to the controller
        outcome.get_result().user_properties.append((CPU_PROPERTY, _cpu_now() - began))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _SECONDS[report.nodeid] += report.duration
    if report.when == "teardown":
        _CPU[report.nodeid] += sum(v for k, v in report.user_properties if k == CPU_PROPERTY)
        for key, value in report.user_properties:
            if key == BEGAN_PROPERTY:
                _BEGAN[report.nodeid] = (float(value[0]), str(value[1]))
    if report.when == "call":
        _TALLIES.extend(v for k, v in report.user_properties if k == FAULT_LEDGER_PROPERTY)


def _cell(tally: dict[str, Any], key: str) -> str:
    value = tally[key]
    if key == "reexec":
        return " ".join(f"{m}={n}" for m, n in sorted(value.items())) or "-"
    return str(value)


def _write_fault_ledger(write: Any) -> None:
    full = os.environ.get("WIGGLE_FAULTS", "") == "full"
    rows = [tuple(title for title, _ in _TALLY_COLUMNS)]
    rows += [tuple(_cell(t, key) for _, key in _TALLY_COLUMNS) for t in _TALLIES]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_TALLY_COLUMNS))]
    write("")
    write(f"fault ledger ({'full' if full else 'short'} suite)")
    for i, row in enumerate(rows):
        write(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            write("-+-".join("-" * w for w in widths))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return  # an xdist worker: the controller prints
    write = terminalreporter.write_line
    if _TALLIES:
        _write_fault_ledger(write)
    report = os.environ.get("WIGGLE_TEST_CPU_REPORT")
    if report:  # every test's seconds and CPU seconds, for finding what makes a run long
        rows = sorted(_SECONDS, key=lambda n: -_CPU.get(n, 0.0))
        first = min((began for began, _ in _BEGAN.values()), default=0.0)

        def when(nodeid: str) -> str:  # seconds into the run, and the process that ran it
            began, process = _BEGAN.get(nodeid, (first, "?"))
            return f"{began - first:.1f}\t{process}"

        Path(report).write_text(
            "".join(f"{_CPU.get(n, 0.0):.2f}\t{_SECONDS[n]:.2f}\t{n}\t{when(n)}\n" for n in rows)
        )
    if len(_SECONDS) >= SHOWN_AFTER_TESTS:
        write("")
        write(f"the {SLOWEST_SHOWN} slowest tests (setup + call + teardown):")
        for nodeid, seconds in sorted(_SECONDS.items(), key=lambda kv: -kv[1])[:SLOWEST_SHOWN]:
            write(f"{seconds:8.1f} s  {nodeid}")
        write("")
        write(
            f"the {SLOWEST_SHOWN} tests that took the most CPU, of {sum(_CPU.values()):.0f} s"
            " in all (their process and the subprocesses they waited for):"
        )
        for nodeid, seconds in sorted(_CPU.items(), key=lambda kv: -kv[1])[:SLOWEST_SHOWN]:
            write(f"{seconds:8.1f} s  {nodeid}")
