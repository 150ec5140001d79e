"""Named credentials with scopes, read from a file the server watches (docs/security.md).

    [[credential]]
    name = "orders-worker"
    scopes = ["worker:orders,billing"]
    token_sha256 = "<64 hex: sha256 of the token>"     # or token_file = "PATH", or both absent
    mtls_identity = "orders-worker"                    # optional: a client certificate's CN/SAN

Scopes: `admin` (everything), `client` (start, signal, read), `operator` (repair), `person`
(list and act on its own human tasks; `groups = [...]` names the groups it is a member of),
`worker:Q1[,Q2...]` (poll, report, heartbeat on those queues; `worker:*` for every queue). A
credential is found by its token (a bearer token in the `authorization` metadata) or, with
mutual TLS, by the identity in the client's certificate. The file is re-read when it changes;
a file that no longer parses leaves the credentials as they were (and says why in the log), so
a typo never locks everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiggle.errors import WiggleError

__all__ = [
    "Credential",
    "CredentialError",
    "CredentialStore",
    "Scopes",
    "parse_scopes",
    "token_digest",
]

_log = logging.getLogger("wiggle.server")

#: How often, at most, a call makes the store look at the file again.
RECHECK_S = 1.0


class CredentialError(WiggleError):
    """A credentials file (or a token file it names) that cannot be used as written."""


@dataclass(frozen=True)
class Scopes:
    """What a credential may do. `queues` None: every queue (admin, `worker:*`)."""

    admin: bool = False
    client: bool = False
    worker: bool = False
    queues: frozenset[str] | None = frozenset()
    operator: bool = False  # may repair: retry, reset, cancel, bulk actions (and read)
    person: bool = False  # may list and act on its own human tasks (docs/human-tasks.md)

    def serves(self, queue: str) -> bool:
        return self.admin or (self.worker and (self.queues is None or queue in self.queues))

    def __str__(self) -> str:
        parts = ["admin"] if self.admin else []
        if self.client:
            parts.append("client")
        if self.operator:
            parts.append("operator")
        if self.person:
            parts.append("person")
        if self.worker:
            parts.append(
                "worker:" + ("*" if self.queues is None else ",".join(sorted(self.queues)))
            )
        return " ".join(parts) or "nothing"


ADMIN = Scopes(admin=True, client=True, worker=True, queues=None, operator=True, person=True)


def parse_scopes(values: Iterable[str]) -> Scopes:
    """`["client", "worker:a,b"]` -> Scopes; ValueError naming the first unknown scope."""
    admin = client = worker = operator = person = False
    queues: set[str] | None = set()
    for value in values:
        if value == "admin":
            admin = True
        elif value == "client":
            client = True
        elif value == "operator":
            operator = True
        elif value == "person":
            person = True
        elif value.startswith("worker:"):
            worker = True
            names = [q.strip() for q in value[len("worker:") :].split(",")]
            if not all(names) or len(names) == 0:
                raise ValueError(f"scope {value!r} names an empty queue")
            if "*" in names:
                queues = None
            elif queues is not None:
                queues.update(names)
        else:
            raise ValueError(
                f"unknown scope {value!r} (use admin, client, operator, person or "
                "worker:QUEUE[,QUEUE...])"
            )
    if admin:
        return ADMIN
    return Scopes(
        False, client, worker, None if queues is None else frozenset(queues), operator, person
    )


def token_digest(token: str) -> str:
    """The hex sha256 of a token: what a credentials file stores instead of the token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Credential:
    name: str
    scopes: Scopes
    digest: str = ""  # hex sha256 of its token ("" for an mTLS-only credential)
    identity: str = ""  # the client certificate identity that stands for it
    groups: tuple[str, ...] = ()  # the groups its person is a member of (human tasks)


@dataclass
class _Table:
    by_digest: dict[str, Credential] = field(default_factory=dict)
    by_identity: dict[str, Credential] = field(default_factory=dict)


def read_token_file(path: Path) -> str:
    """A token kept in a file: its content without surrounding whitespace."""
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise CredentialError(f"cannot read token file {path}: {exc.strerror}") from None
    if not token:
        raise CredentialError(f"token file {path} is empty")
    return token


def _credential(entry: Mapping[str, Any], where: str, base: Path) -> Credential:
    known = {"name", "scopes", "token_sha256", "token_file", "mtls_identity", "groups"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise CredentialError(f"{where}: unknown key {unknown[0]!r} (known: {sorted(known)})")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise CredentialError(f"{where}: every credential needs a `name`")
    where = f"{where} ({name!r})"
    scopes = entry.get("scopes")
    if not isinstance(scopes, list) or not scopes or not all(isinstance(s, str) for s in scopes):
        raise CredentialError(f"{where}: `scopes` must be a non-empty list of strings")
    try:
        parsed = parse_scopes(scopes)
    except ValueError as exc:
        raise CredentialError(f"{where}: {exc}") from None
    digest = entry.get("token_sha256", "")
    token_file = entry.get("token_file", "")
    identity = entry.get("mtls_identity", "")
    if not all(isinstance(v, str) for v in (digest, token_file, identity)):
        raise CredentialError(f"{where}: token_sha256, token_file and mtls_identity are strings")
    if digest and token_file:
        raise CredentialError(f"{where}: give token_sha256 or token_file, not both")
    if digest and (len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest)):
        raise CredentialError(f"{where}: token_sha256 must be 64 lower-case hex digits")
    if token_file:
        digest = token_digest(read_token_file(base / token_file))
    if not digest and not identity:
        raise CredentialError(
            f"{where}: needs a token (token_sha256 or token_file), an mtls_identity, or both"
        )
    groups = entry.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        raise CredentialError(f"{where}: `groups` must be a list of non-empty strings")
    return Credential(name, parsed, digest, identity, tuple(dict.fromkeys(groups)))


def parse_credentials(text: str, path: Path) -> list[Credential]:
    """The credentials of a file's text; CredentialError saying where it is wrong."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CredentialError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(doc) - {"credential"})
    if unknown:
        raise CredentialError(f"{path}: unknown table {unknown[0]!r} (expected [[credential]])")
    entries = doc.get("credential", [])
    if not isinstance(entries, list):
        raise CredentialError(f"{path}: `credential` must be an array of tables ([[credential]])")
    creds = [
        _credential(entry, f"{path}: credential {i}", path.parent)
        for i, entry in enumerate(entries, start=1)
    ]
    seen: set[str] = set()
    for cred in creds:
        if cred.name in seen:
            raise CredentialError(f"{path}: two credentials are named {cred.name!r}")
        seen.add(cred.name)
    return creds


class CredentialStore:
    """Who may call: the credentials of a file (re-read when it changes) plus, optionally,
    one shared token that stands for an admin (the one-token mode)."""

    def __init__(self, path: Path | None = None, *, admin_token: str | None = None) -> None:
        self._path = path
        self._fixed: list[Credential] = []
        if admin_token:
            self._fixed.append(Credential("token", ADMIN, token_digest(admin_token)))
        self._lock = threading.Lock()
        self._table = _Table()
        self._stamp: tuple[int, int, int] | None = None
        self._checked = 0.0
        self._install(self._read() if path is not None else [])

    @property
    def path(self) -> Path | None:
        return self._path

    def _read(self) -> list[Credential]:
        assert self._path is not None
        try:
            stat = os.stat(self._path)
            text = self._path.read_text()
        except OSError as exc:
            raise CredentialError(
                f"cannot read credentials file {self._path}: {exc.strerror}"
            ) from None
        creds = parse_credentials(text, self._path)
        self._stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        return creds

    def _install(self, creds: list[Credential]) -> None:
        table = _Table()
        for cred in [*self._fixed, *creds]:
            if cred.digest:
                table.by_digest[cred.digest] = cred
            if cred.identity:
                table.by_identity[cred.identity] = cred
        with self._lock:
            self._table = table

    def reload_if_changed(self, now: float | None = None) -> bool:
        """Re-read the file when it changed since the last read (looked at most once a
        second); True when new credentials were installed."""
        if self._path is None:
            return False
        now = time.monotonic() if now is None else now
        with self._lock:
            if now - self._checked < RECHECK_S:
                return False
            self._checked = now
        try:
            stat = os.stat(self._path)
        except OSError as exc:
            _log.error(
                "credentials file %s unreadable (%s); keeping the current credentials",
                self._path,
                exc.strerror,
            )
            return False
        if (stat.st_mtime_ns, stat.st_size, stat.st_ino) == self._stamp:
            return False
        try:
            creds = self._read()
        except CredentialError as exc:
            _log.error("%s; keeping the current credentials", exc)
            return False
        self._install(creds)
        _log.info("credentials reloaded from %s (%d)", self._path, len(creds))
        return True

    def by_token(self, token: str) -> Credential | None:
        digest = token_digest(token)
        with self._lock:
            table = self._table
        found = table.by_digest.get(digest)
        # The lookup is by digest; compare once more in constant time all the same.
        if found is not None and hmac.compare_digest(found.digest, digest):
            return found
        return None

    def by_identity(self, identities: Iterable[str]) -> Credential | None:
        with self._lock:
            table = self._table
        for identity in identities:
            found = table.by_identity.get(identity)
            if found is not None:
                return found
        return None

    @property
    def has_identities(self) -> bool:
        with self._lock:
            return bool(self._table.by_identity)
