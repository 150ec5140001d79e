"""Check (default) or rewrite (--write) definitions/hashes.json, the golden version of every flow.

A flow's version is the hash of its canonical graph, so this file changes only when a flow's
behaviour does - or when the compiler's output does, which is exactly what the check guards
against. Run with --write only after an intended change, and say why in the commit.

    python scripts/update_definition_hashes.py           # exit 1 and a diff when out of date
    python scripts/update_definition_hashes.py --write   # regenerate
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from wiggle.compiler import load_flow_file
from wiggle.errors import FlowError

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = ROOT / "definitions"
GOLDEN = DEFINITIONS / "hashes.json"


def current_hashes() -> dict[str, str]:
    """File name -> version of every flow in definitions/."""
    hashes = {}
    for path in sorted(DEFINITIONS.glob("*.yaml")):
        hashes[path.name] = load_flow_file(path).version
    return hashes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {GOLDEN.name}")
    args = parser.parse_args(argv)
    try:
        hashes = current_hashes()
    except FlowError as exc:
        print(exc, file=sys.stderr)
        return 1
    text = json.dumps(hashes, indent=2, sort_keys=True) + "\n"
    if args.write:
        GOLDEN.write_text(text)
        print(f"wrote {len(hashes)} hashes to {GOLDEN.relative_to(ROOT)}")
        return 0
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if golden == hashes:
        print(f"{len(hashes)} definition hashes match {GOLDEN.relative_to(ROOT)}")
        return 0
    for name in sorted(set(golden) | set(hashes)):
        if golden.get(name) != hashes.get(name):
            print(
                f"{name}: golden {golden.get(name)} != current {hashes.get(name)}", file=sys.stderr
            )
    print("run with --write after an intended change", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
