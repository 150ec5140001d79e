"""The WIGGLE_* connection variables, read by the rules every SDK shares (docs/worker-protocol.md,
"Connection"): by `wiggle._connection`, the Python `Worker` and the `wiggle` command's flags."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from wiggle._connection import VARIABLES, Settings, connection, settings_from_env
from wiggle.cli import build_parser
from wiggle.cli._options import add_connection_flags, connection_of
from wiggle.errors import InvalidRequest
from wiggle.wire import TlsConfig
from wiggle.worker import Registry, Worker

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in VARIABLES.values():
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def pems(tmp_path: Path) -> dict[str, str]:
    files = {}
    for name in ("ca", "cert", "key"):
        (tmp_path / f"{name}.pem").write_bytes(f"{name} pem".encode())
        files[name] = str(tmp_path / f"{name}.pem")
    return files


def test_nothing_set_is_plaintext_to_the_default_address() -> None:
    conn = connection(environ={})
    assert (conn.address, conn.token, conn.tls) == ("127.0.0.1:7233", None, None)


def test_every_variable_is_read(pems: dict[str, str]) -> None:
    conn = connection(
        environ={
            "WIGGLE_ADDRESS": "wiggle.internal:7233",
            "WIGGLE_AUTH_TOKEN": "secret",
            "WIGGLE_TLS_CA": pems["ca"],
            "WIGGLE_TLS_CERT": pems["cert"],
            "WIGGLE_TLS_KEY": pems["key"],
            "WIGGLE_TLS_SERVER_NAME": "wiggle",
        }
    )
    assert conn.address == "wiggle.internal:7233"
    assert conn.token == "secret"
    assert conn.tls == TlsConfig(
        ca=b"ca pem", cert=b"cert pem", key=b"key pem", server_name="wiggle"
    )


def test_an_empty_variable_counts_as_unset() -> None:
    empty = {var: "" for var in VARIABLES.values()}
    assert settings_from_env(empty) == Settings()


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_wiggle_tls_on_is_tls_with_the_system_roots(value: str) -> None:
    assert connection(environ={"WIGGLE_TLS": value}).tls == TlsConfig()


@pytest.mark.parametrize("value", ["0", "false", "No", "off"])
def test_wiggle_tls_off_is_plaintext(value: str) -> None:
    assert connection(environ={"WIGGLE_TLS": value}).tls is None


def test_a_malformed_wiggle_tls_is_refused_by_name() -> None:
    with pytest.raises(InvalidRequest, match=r"WIGGLE_TLS='maybe' is not one of 1, true"):
        connection(environ={"WIGGLE_TLS": "maybe"})


@pytest.mark.parametrize("var", ["WIGGLE_TLS_CA", "WIGGLE_TLS_SERVER_NAME"])
def test_any_tls_setting_implies_tls(var: str, pems: dict[str, str]) -> None:
    value = pems["ca"] if var == "WIGGLE_TLS_CA" else "wiggle"
    assert connection(environ={var: value}).tls is not None


@pytest.mark.parametrize("var", ["WIGGLE_TLS_CERT", "WIGGLE_TLS_KEY"])
def test_a_certificate_without_its_key_is_refused(var: str, pems: dict[str, str]) -> None:
    with pytest.raises(InvalidRequest, match="both a client certificate and its key"):
        connection(environ={var: pems["cert"]})


def test_a_missing_tls_file_is_refused_by_name(tmp_path: Path) -> None:
    missing = tmp_path / "no-ca.pem"
    with pytest.raises(InvalidRequest, match=f"cannot read the TLS CA {missing}"):
        connection(environ={"WIGGLE_TLS_CA": str(missing)})


def test_the_token_file_is_read_and_trimmed(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    env = {"WIGGLE_AUTH_TOKEN_FILE": str(tmp_path / "token")}
    assert connection(environ=env).token == "from-file"


def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("\n")
    with pytest.raises(InvalidRequest, match="is empty"):
        connection(environ={"WIGGLE_AUTH_TOKEN_FILE": str(tmp_path / "token")})


def test_a_token_and_a_token_file_together_are_refused(tmp_path: Path) -> None:
    env = {"WIGGLE_AUTH_TOKEN": "a", "WIGGLE_AUTH_TOKEN_FILE": str(tmp_path / "token")}
    with pytest.raises(InvalidRequest, match="not both"):
        connection(environ=env)
    with pytest.raises(InvalidRequest, match="not both"):
        connection(Settings(token="a", token_file="/t"), environ={})


def test_an_explicit_setting_wins_over_its_variable(pems: dict[str, str]) -> None:
    env = {"WIGGLE_ADDRESS": "env:1", "WIGGLE_TLS_SERVER_NAME": "env-name"}
    conn = connection(Settings(address="explicit:2", ca=pems["ca"]), environ=env)
    assert conn.address == "explicit:2"
    # What the explicit settings leave unset still comes from the environment.
    assert conn.tls == TlsConfig(ca=b"ca pem", server_name="env-name")


def test_an_explicit_token_ignores_both_token_variables(tmp_path: Path) -> None:
    env = {"WIGGLE_AUTH_TOKEN": "env", "WIGGLE_AUTH_TOKEN_FILE": str(tmp_path / "absent")}
    assert connection(Settings(token="explicit"), environ=env).token == "explicit"
    (tmp_path / "token").write_text("file")
    explicit = Settings(token_file=str(tmp_path / "token"))
    assert connection(explicit, environ={"WIGGLE_AUTH_TOKEN": "env"}).token == "file"


def test_explicit_plaintext_ignores_the_tls_variables(pems: dict[str, str]) -> None:
    env = {"WIGGLE_TLS": "1", "WIGGLE_TLS_CA": pems["ca"], "WIGGLE_TLS_CERT": pems["cert"]}
    assert connection(Settings(tls=False), environ=env).tls is None


# -- the Python worker ---------------------------------------------------------------------------


def test_a_worker_given_nothing_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, pems: dict[str, str]
) -> None:
    monkeypatch.setenv("WIGGLE_ADDRESS", "env:1")
    monkeypatch.setenv("WIGGLE_AUTH_TOKEN", "env-token")
    monkeypatch.setenv("WIGGLE_TLS_CA", pems["ca"])
    worker = Worker(registry=Registry(), stub=object())
    assert worker.address == "env:1"
    assert worker._token == "env-token"
    assert worker._tls == TlsConfig(ca=b"ca pem")


def test_a_worker_defaults_to_plaintext_on_the_default_address() -> None:
    worker = Worker(registry=Registry(), stub=object())
    assert (worker.address, worker._token, worker._tls) == ("127.0.0.1:7233", None, False)


def test_a_workers_arguments_win_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, pems: dict[str, str]
) -> None:
    monkeypatch.setenv("WIGGLE_ADDRESS", "env:1")
    monkeypatch.setenv("WIGGLE_AUTH_TOKEN_FILE", "/no/such/token")
    monkeypatch.setenv("WIGGLE_TLS_CA", pems["ca"])
    worker = Worker("explicit:2", token="explicit", tls=False, registry=Registry(), stub=object())
    assert (worker.address, worker._token, worker._tls) == ("explicit:2", "explicit", False)
    given = TlsConfig(ca=b"given ca")
    worker = Worker("explicit:2", token="t", tls=given, registry=Registry(), stub=object())
    assert worker._tls == TlsConfig(ca=b"given ca")


def test_a_worker_refuses_a_bad_variable_when_it_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WIGGLE_TLS", "sometimes")
    with pytest.raises(InvalidRequest, match="WIGGLE_TLS='sometimes'"):
        Worker(registry=Registry(), stub=object())


# -- the wiggle command ----------------------------------------------------------------------------


def _flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_connection_flags(parser)
    return parser.parse_args(list(argv))


def test_the_flags_read_the_variables_they_leave_unset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WIGGLE_ADDRESS", "env:1")
    monkeypatch.setenv("WIGGLE_AUTH_TOKEN", "env-token")
    monkeypatch.setenv("WIGGLE_TLS", "true")
    conn = connection_of(_flags())
    assert (conn.address, conn.token, conn.tls) == ("env:1", "env-token", TlsConfig())


def test_a_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WIGGLE_ADDRESS", "env:1")
    monkeypatch.setenv("WIGGLE_AUTH_TOKEN", "env-token")
    monkeypatch.setenv("WIGGLE_TLS_SERVER_NAME", "env-name")
    (tmp_path / "token").write_text("file-token")
    conn = connection_of(
        _flags(
            "--address", "flag:2", "--token-file", str(tmp_path / "token"), "--tls-server-name", "n"
        )
    )
    assert (conn.address, conn.token, conn.tls) == (
        "flag:2",
        "file-token",
        TlsConfig(server_name="n"),
    )


def test_a_malformed_variable_is_refused_only_when_the_command_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WIGGLE_TLS", "maybe")
    args = build_parser().parse_args(["worker", "--handlers", "h.py"])
    with pytest.raises(InvalidRequest, match="WIGGLE_TLS='maybe'"):
        connection_of(args)


def test_worker_help_points_to_the_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert 'docs/worker-protocol.md, "Connection"' in text
    for var in VARIABLES.values():
        assert var in text


def test_the_docs_table_lists_every_variable() -> None:
    doc = (ROOT / "docs/worker-protocol.md").read_text()
    rows = {
        line.split("|")[1].strip().strip("`")
        for line in doc.splitlines()
        if line.startswith("| `WIGGLE_")
    }
    assert rows == set(VARIABLES.values())
