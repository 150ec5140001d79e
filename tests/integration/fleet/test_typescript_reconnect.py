"""The TypeScript worker rides out a server restart, as the Java worker does
(test_java_reconnect.py): it backs off while the server is gone, says so once, and serves the
restarted server (same address, same database) without being restarted."""

from __future__ import annotations

from pathlib import Path

from tests.integration.fleet.test_java_reconnect import serves_a_restarted_server


def test_the_typescript_worker_serves_a_restarted_server(
    tmp_path: Path, typescript_worker_script: Path
) -> None:
    serves_a_restarted_server(tmp_path, ["node", str(typescript_worker_script)])
