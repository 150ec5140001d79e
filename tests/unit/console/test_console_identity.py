"""Who is using the console (wiggle/console/_identity.py): a login mapped to a person, their
groups and scopes, the sessions that remember it, and the console's own identity."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiggle.console import settings_for
from wiggle.console._identity import CredentialsLogin, Identity, console_identity
from wiggle.console._security import Sessions
from wiggle.errors import InvalidRequest
from wiggle.server._credentials import token_digest

PEOPLE = """
[[credential]]
name = "ana"
scopes = ["person"]
groups = ["engineering-leads"]
token_sha256 = "{ana}"

[[credential]]
name = "ops"
scopes = ["operator", "person"]
token_sha256 = "{ops}"

[[credential]]
name = "shop"
scopes = ["client"]
token_sha256 = "{shop}"
"""


@pytest.fixture
def credentials(tmp_path: Path) -> Path:
    path = tmp_path / "credentials.toml"
    digests = {name: token_digest(f"{name}-token") for name in ("ana", "ops", "shop")}
    path.write_text(PEOPLE.format(**digests))
    return path


def test_a_login_is_the_credential_its_token_names(credentials):
    login = CredentialsLogin(credentials, token="shared")
    ana = login.identify("ana-token")
    assert ana == Identity("ana", ("engineering-leads",), frozenset({"person"}), "ana-token")
    assert not ana.reads_everything and not ana.task_admin
    assert ana.describe() == "ana (engineering-leads)"
    ops = login.identify("ops-token")
    assert ops is not None and ops.reads_everything and ops.task_admin
    shop = login.identify("shop-token")
    assert shop is not None and shop.reads_everything and not shop.task_admin
    shared = login.identify("shared")  # the shared token: an admin named as the server names it
    assert shared is not None and shared.person == "token" and shared.task_admin
    assert login.identify("nope") is None and login.identify("") is None
    assert CredentialsLogin(None, token=None).identify("anything") is None


def test_a_console_without_a_login_is_an_admin_named_by_as():
    assert console_identity(None, None).person == "admin"
    assert console_identity(None, "t").person == "token"
    me = console_identity("olga", "t")
    assert me.person == "olga" and me.task_admin and me.reads_everything and me.token is None


def test_sessions_remember_who_logged_in_until_they_log_out():
    sessions = Sessions()
    ana = Identity("ana", ("engineering-leads",), frozenset({"person"}), "ana-token")
    first, second = sessions.open(ana), sessions.open(console_identity("x", None))
    assert first != second
    assert sessions.identity(first) == ana and sessions.valid(second)
    sessions.logout(first)
    assert sessions.identity(first) is None and sessions.identity("made-up") is None
    assert sessions.identity(None) is None


def test_a_credentials_file_asks_for_the_login_on_loopback_and_is_checked_at_start(
    credentials, tmp_path
):
    settings = settings_for("127.0.0.1", None, credentials=str(credentials), person="olga")
    assert settings.require_login and settings.loopback_only and settings.person == "olga"
    who = settings.login().identify("ana-token")
    assert who is not None and who.person == "ana"
    assert not settings_for("127.0.0.1", None).require_login
    with pytest.raises(InvalidRequest, match=r"--credentials: .*cannot read"):
        settings_for("127.0.0.1", None, credentials=str(tmp_path / "missing.toml"))
    # Off loopback a credentials file is enough for the login: no shared token needed.
    assert settings_for("0.0.0.0", None, credentials=str(credentials)).require_login
    with pytest.raises(InvalidRequest, match="or --credentials"):
        settings_for("0.0.0.0", None)
