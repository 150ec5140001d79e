"""Who is using the console: a login mapped to a person, their groups and their scopes.

    who = CredentialsLogin(Path("people.toml"), token=None).identify(typed_token)
    who.person, who.groups, who.scopes     # "ana", ("engineering-leads",), {"person"}

The seam is `Authenticator`: anything with `identify(offered) -> Identity | None`. The one
shipped reads the server's own credentials file (docs/security.md), so a login is a credential's
bearer token and the person is its name; the shared `--token` logs in as an admin named
"token", as the server names it. An identity provider would be another `Authenticator`: it maps
its login to an `Identity` whose `token` is a credential the server accepts for that person
(the server checks every call again: the console never acts for a person on its own word).

What an identity sees in the console (docs/console.md#people-and-the-login):

- `admin`, `operator` or `client` in its scopes: every page, each call made with its own token,
  so the server's refusals are its own (an operator's start is refused as it would be by the
  CLI). `admin` or `operator` also act on any human task as an admin.
- only `person` (or worker scopes): the Tasks pages alone, and on a task's page the context of
  the instance it is on, which the console reads with its own credential once the server has
  shown the person that task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from wiggle.server._credentials import Credential, CredentialStore, Scopes

__all__ = ["Authenticator", "CredentialsLogin", "Identity", "console_identity", "scope_names"]

#: Scopes that read instances, flows and the rest of the console.
_READERS = frozenset({"admin", "operator", "client"})
#: Scopes that act on any human task as an admin (the server's rule, docs/human-tasks.md).
_TASK_ADMINS = frozenset({"admin", "operator"})


@dataclass(frozen=True)
class Identity:
    """A person using the console.

    `person`: the name they act on human tasks under; `groups`: the groups they are a member of;
    `scopes`: scope names as a credentials file writes them (`admin`, `operator`, `client`,
    `person`, `worker`); `token`: the bearer token the console presents to the server for their
    calls (None: the console's own credential, `--token`)."""

    person: str
    groups: tuple[str, ...] = ()
    scopes: frozenset[str] = field(default_factory=frozenset)
    token: str | None = None

    @property
    def reads_everything(self) -> bool:
        """Sees every page of the console, not only the Tasks pages."""
        return bool(self.scopes & _READERS)

    @property
    def task_admin(self) -> bool:
        """May see and act on any human task as an admin."""
        return bool(self.scopes & _TASK_ADMINS)

    def describe(self) -> str:
        """`ana (engineering-leads)`, as the page header writes it."""
        return f"{self.person} ({', '.join(self.groups)})" if self.groups else self.person


class Authenticator(Protocol):
    """Maps what a person typed at the login to who they are; None refuses the login."""

    def identify(self, offered: str) -> Identity | None: ...


def scope_names(scopes: Scopes) -> frozenset[str]:
    names = {"admin", "operator", "client", "person"} if scopes.admin else set()
    for name in ("client", "operator", "person", "worker"):
        if getattr(scopes, name):
            names.add(name)
    return frozenset(names)


def _identity(cred: Credential, token: str) -> Identity:
    return Identity(cred.name, cred.groups, scope_names(cred.scopes), token)


class CredentialsLogin:
    """Logins checked as the server checks calls: a token of the credentials file at `path`
    (re-read when it changes, as the server does), or the shared `token`, an admin named
    "token". Thread-safe."""

    def __init__(self, path: Path | None, token: str | None = None) -> None:
        self._store = CredentialStore(path, admin_token=token)

    def identify(self, offered: str) -> Identity | None:
        if not offered:
            return None
        self._store.reload_if_changed()
        cred = self._store.by_token(offered)
        return None if cred is None else _identity(cred, offered)


def console_identity(person: str | None, token: str | None) -> Identity:
    """Who a console without a login is: an admin (it may do everything its own credential
    may), acting on human tasks under `person` (`--as`); by default "token" when the console has
    a token (the name the server gives a shared token) and "admin" when it has none."""
    name = person or ("token" if token else "admin")
    return Identity(name, (), frozenset({"admin", "operator", "client", "person"}), None)
