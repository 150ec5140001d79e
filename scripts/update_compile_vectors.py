"""Regenerate the compile conformance vectors (and the packaged schema copies) from the compiler.

    python scripts/update_compile_vectors.py           # rewrite the golden files
    python scripts/update_compile_vectors.py --check   # exit 1 if any golden file would change

Goldens are only ever written by this script; the test suite compares against them byte for byte.
Review the diff of every regenerated file before committing it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from wiggle.compiler import load_flow_file
from wiggle.errors import FlowError

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "spec" / "conformance" / "compile"
SCHEMAS = ROOT / "spec" / "schema"
PACKAGED_SCHEMAS = ROOT / "wiggle" / "compiler" / "schema"
FLOW_SUFFIXES = (".yaml", ".yml", ".json")


def flows(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.suffix in FLOW_SUFFIXES and not p.name.endswith(".expected.json")
    )


def expected_path(flow: Path) -> Path:
    return flow.with_name(flow.name.rsplit(".", 1)[0] + ".expected.json")


def _json(value: object) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def goldens() -> dict[Path, bytes]:
    """Every golden file's path and the bytes it should hold."""
    out: dict[Path, bytes] = {}
    for name in ("flow.schema.json", "graph.schema.json"):
        out[PACKAGED_SCHEMAS / name] = (SCHEMAS / name).read_bytes()
    index: dict[str, str] = {}
    for flow in flows(VECTORS / "valid"):
        # Relative names keep machine paths out of the goldens.
        compiled = load_flow_file(flow.relative_to(ROOT))
        out[expected_path(flow)] = compiled.canonical
        index[flow.name] = compiled.version
    out[VECTORS / "index.json"] = _json(index)
    for flow in flows(VECTORS / "invalid"):
        try:
            load_flow_file(flow.relative_to(ROOT))
        except FlowError as error:
            found = [
                {"line": d.line, "column": d.column, "path": d.path, "message": d.message}
                for d in error.diagnostics
            ]
            out[expected_path(flow)] = _json({"diagnostics": found})
        else:
            raise SystemExit(f"{flow.name}: an invalid vector compiled without error")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale golden files")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    stale = [p for p, data in goldens().items() if not p.exists() or p.read_bytes() != data]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)}")
        return 1 if stale else 0
    for path, data in goldens().items():
        if path in stale:
            path.write_bytes(data)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
