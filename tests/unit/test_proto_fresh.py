"""The committed generated protobuf code matches spec/proto (STYLE habit 7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_matches_the_proto() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, (
        "generated code under wiggle/_proto is stale; run `python scripts/gen_proto.py`\n"
        + result.stderr
    )
