"""The TypeScript worker rides out a server restart, as the Java worker does
(test_java_reconnect.py): it backs off while the server is gone, says so once, and serves the
restarted server (same address, same database) without being restarted."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.integration.fleet.test_java_reconnect import serves_a_restarted_server

SDK = Path(__file__).resolve().parents[3] / "sdk/typescript"
WORKER = SDK / "dist/esm/bin/wiggle-conformance-worker.js"


def test_the_typescript_worker_serves_a_restarted_server(tmp_path: Path) -> None:
    if not WORKER.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed to build sdk/typescript (bash scripts/setup.sh installs it)"
        subprocess.run([npm, "run", "-s", "build"], cwd=SDK, check=True)
    serves_a_restarted_server(tmp_path, ["node", str(WORKER)])
