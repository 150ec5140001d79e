"""How a client or worker reaches a server: settings given explicitly, else the `WIGGLE_*`
connection variables, else the defaults (docs/worker-protocol.md, "Connection").

Every SDK reads the same variables by the same rules; this is the Python side's one copy, used by
`wiggle.worker.Worker` and the `wiggle` command's connection flags. A setting given explicitly
(an argument, a flag) wins over its variable. The token and the token file are one setting:
giving either explicitly ignores both variables, and giving both at the same level is a mistake.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from wiggle.errors import InvalidRequest
from wiggle.wire import TlsConfig

__all__ = [
    "DEFAULT_ADDRESS",
    "VARIABLES",
    "Connection",
    "Settings",
    "connection",
    "explicit_tls",
    "settings_from_env",
]

DEFAULT_ADDRESS = "127.0.0.1:7233"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})

#: Each setting's variable, in the order the docs' table lists them.
VARIABLES = {
    "address": "WIGGLE_ADDRESS",
    "token": "WIGGLE_AUTH_TOKEN",
    "token_file": "WIGGLE_AUTH_TOKEN_FILE",
    "tls": "WIGGLE_TLS",
    "ca": "WIGGLE_TLS_CA",
    "cert": "WIGGLE_TLS_CERT",
    "key": "WIGGLE_TLS_KEY",
    "server_name": "WIGGLE_TLS_SERVER_NAME",
}


@dataclass(frozen=True)
class Settings:
    """Connection settings as given, before defaults; None is "not given"."""

    address: str | None = None
    token: str | None = None
    token_file: str | None = None
    tls: bool | None = None  # False: plaintext, whatever the TLS variables say
    ca: str | bytes | None = None  # a path, or the PEM itself
    cert: str | bytes | None = None
    key: str | bytes | None = None
    server_name: str | None = None

    def over(self, below: Settings) -> Settings:
        """These settings, with what they leave unset taken from `below`."""
        merged = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, value in merged.items():
            if value is None:
                merged[name] = getattr(below, name)
        if self.token is not None or self.token_file is not None:
            merged["token"], merged["token_file"] = self.token, self.token_file
        return Settings(**merged)


@dataclass(frozen=True)
class Connection:
    """Where the server is and how to talk to it, every file already read."""

    address: str
    token: str | None
    tls: TlsConfig | None


def _tls_flag(value: str) -> bool:
    word = value.strip().lower()
    if word in _ON:
        return True
    if word in _OFF:
        return False
    raise InvalidRequest(
        f"WIGGLE_TLS={value!r} is not one of 1, true, yes, on (TLS) or 0, false, no, off"
    )


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """The `WIGGLE_*` connection variables; an empty one counts as unset."""
    source = os.environ if environ is None else environ
    raw = {name: source.get(var) or None for name, var in VARIABLES.items()}
    tls = raw.pop("tls")
    return Settings(tls=None if tls is None else _tls_flag(tls), **raw)


def _read(path: str | bytes, what: str) -> bytes:
    if isinstance(path, bytes):
        return path
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise InvalidRequest(f"cannot read the {what} {path}: {exc.strerror}") from None


def _token(s: Settings) -> str | None:
    if s.token is not None and s.token_file is not None:
        raise InvalidRequest(
            "give a token or a token file (WIGGLE_AUTH_TOKEN or WIGGLE_AUTH_TOKEN_FILE), not both"
        )
    if s.token_file is None:
        return s.token
    token = _read(s.token_file, "token file").decode(errors="replace").strip()
    if not token:
        raise InvalidRequest(f"the token file {s.token_file} is empty")
    return token


def _tls(s: Settings) -> TlsConfig | None:
    if s.tls is False:  # plaintext asked for: no TLS variable applies
        return None
    if not (s.tls or s.ca or s.cert or s.key or s.server_name):
        return None
    if (s.cert is None) != (s.key is None):
        raise InvalidRequest(
            "mutual TLS needs both a client certificate and its key "
            "(WIGGLE_TLS_CERT and WIGGLE_TLS_KEY), or neither"
        )
    # Read now, so that a missing file is reported at start-up by name, not by gRPC later.
    return TlsConfig(
        ca=None if s.ca is None else _read(s.ca, "TLS CA"),
        cert=None if s.cert is None else _read(s.cert, "TLS certificate"),
        key=None if s.key is None else _read(s.key, "TLS key"),
        server_name=s.server_name,
    )


def connection(
    explicit: Settings = Settings(), environ: Mapping[str, str] | None = None
) -> Connection:
    """The connection `explicit` asks for, the environment filling in what it leaves unset."""
    s = explicit.over(settings_from_env(environ))
    return Connection(address=s.address or DEFAULT_ADDRESS, token=_token(s), tls=_tls(s))


def explicit_tls(tls: TlsConfig | bool | None) -> Settings:
    """The TLS part of `Settings` for an API's `tls=` argument (None: from the environment)."""
    if not isinstance(tls, TlsConfig):
        return Settings(tls=tls)

    def given(value: str | os.PathLike[str] | bytes | None) -> str | bytes | None:
        return value if value is None or isinstance(value, bytes) else os.fspath(value)

    return Settings(
        tls=True,
        ca=given(tls.ca),
        cert=given(tls.cert),
        key=given(tls.key),
        server_name=tls.server_name,
    )
