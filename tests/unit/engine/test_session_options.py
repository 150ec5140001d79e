"""The options every PostgreSQL session of the engine is opened with (store/db.py): the
idle-in-transaction timeout, added to what the URL says, never over it."""

from __future__ import annotations

import pytest
from sqlalchemy import make_url

from wiggle.engine import Engine
from wiggle.engine.store.db import Database, _session_options

URL = "postgresql+psycopg://u@/db?host=/tmp"


def test_the_timeout_is_sent_in_milliseconds():
    assert _session_options(make_url(URL), 1.5) == "-c idle_in_transaction_session_timeout=1500"


def test_zero_leaves_the_servers_own_setting():
    assert _session_options(make_url(URL), 0) is None


def test_the_urls_own_options_are_kept():
    url = make_url(URL + "&options=-c%20search_path%3Dwf")
    got = _session_options(url, 2)
    assert got == "-c search_path=wf -c idle_in_transaction_session_timeout=2000"


def test_a_timeout_the_url_sets_itself_stands():
    url = make_url(URL + "&options=-c%20idle_in_transaction_session_timeout%3D0")
    assert _session_options(url, 2) is None


def test_sqlite_has_no_such_sessions_and_a_bare_database_leaves_it_off(tmp_path):
    engine = Engine(f"sqlite:///{tmp_path / 'w.db'}", leader_ttl_s=3.0)
    try:
        assert engine.db.idle_in_transaction_timeout_s == 0.0  # no such sessions on SQLite
    finally:
        engine.close()
    db = Database(URL)  # creates no connection until asked
    try:
        assert db.idle_in_transaction_timeout_s == 0.0  # off unless the engine says
    finally:
        db.dispose()


def test_the_server_command_hands_the_timeout_to_the_engine(monkeypatch, tmp_path):
    """`wiggle server --idle-in-transaction-timeout` and its environment twin reach the
    Engine; absent, the engine's default (the lease) applies; a negative one is refused."""
    import wiggle.engine
    import wiggle.server
    from wiggle.cli import build_parser
    from wiggle.errors import InvalidRequest

    given: list[float | None] = []

    class Recorded:
        def __init__(self, *_: object, idle_in_transaction_timeout_s: float | None, **__: object):
            given.append(idle_in_transaction_timeout_s)

    monkeypatch.setattr(wiggle.engine, "Engine", Recorded)
    monkeypatch.setattr(wiggle.server, "serve", lambda *_: None)
    monkeypatch.delenv("WIGGLE_IDLE_IN_TRANSACTION_TIMEOUT", raising=False)

    def run(*flags: str) -> None:
        args = build_parser().parse_args(
            ["server", "--database", f"sqlite:///{tmp_path}/w.db", *flags]
        )
        args.handler(args)

    run("--idle-in-transaction-timeout", "2.5")
    run()
    monkeypatch.setenv("WIGGLE_IDLE_IN_TRANSACTION_TIMEOUT", "0")
    run()
    assert given == [2.5, None, 0.0]
    with pytest.raises(InvalidRequest, match="--idle-in-transaction-timeout"):
        run("--idle-in-transaction-timeout", "-1")
