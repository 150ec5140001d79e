"""Regenerates the committed Python code for spec/proto into wiggle/_proto/.

Usage: python scripts/gen_proto.py [--check]

With --check nothing is written: the script exits 1 when the committed code differs from what
the .proto files generate now (tests/unit/test_proto_fresh.py runs it that way).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "spec" / "proto"
OUT = ROOT / "wiggle" / "_proto"


def generate(into: Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={into}",
        f"--pyi_out={into}",
        f"--grpc_python_out={into}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    # Generated modules import `wiggle.v1...` absolutely; make them packages under wiggle._proto
    # and rewrite the imports to the vendored location.
    for directory in [into, *[d for d in into.rglob("*") if d.is_dir()]]:
        (directory / "__init__.py").touch()
    for module in into.rglob("*.py"):
        text = module.read_text()
        text = text.replace("from wiggle.v1 import", "from wiggle._proto.wiggle.v1 import")
        module.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "_proto"
        fresh.mkdir()
        generate(fresh)
        if args.check:
            stale = _differences(fresh, OUT)
            for name in stale:
                print(f"stale generated file: wiggle/_proto/{name}", file=sys.stderr)
            return 1 if stale else 0
        if OUT.exists():
            shutil.rmtree(OUT)
        shutil.copytree(fresh, OUT)
    return 0


def _differences(fresh: Path, committed: Path) -> list[str]:
    names = {str(p.relative_to(fresh)) for p in fresh.rglob("*") if p.is_file()}
    names |= {
        str(p.relative_to(committed))
        for p in committed.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    return sorted(
        n
        for n in names
        if not (fresh / n).is_file()
        or not (committed / n).is_file()
        or not filecmp.cmp(fresh / n, committed / n, shallow=False)
    )


if __name__ == "__main__":
    raise SystemExit(main())
