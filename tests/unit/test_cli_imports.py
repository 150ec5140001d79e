"""Building the `wiggle` parser stays cheap: no grpc, SQLAlchemy or networkx until a command runs.

Every `wiggle` invocation (and every acceptance test) pays for what the parser imports.
"""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("grpc", "sqlalchemy", "networkx", "jsonschema", "wiggle.engine", "wiggle.conformance")


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from wiggle.cli import build_parser\n"
        "build_parser()\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
