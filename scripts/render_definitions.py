"""Render every flow in definitions/ to docs/flows/<file stem>.svg (the README shows them).

python scripts/render_definitions.py                 # svg into docs/flows/
python scripts/render_definitions.py --format png --out build/flows
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wiggle_render import FORMATS, render

from wiggle.compiler import load_flow_file
from wiggle.errors import WiggleError

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=FORMATS, default="svg")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "flows")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for path in sorted((ROOT / "definitions").glob("*.yaml")):
            flow = load_flow_file(path)
            target = args.out / f"{path.stem}.{args.format}"
            target.write_bytes(render(flow.graph, args.format))
            print(target.relative_to(ROOT) if target.is_relative_to(ROOT) else target)
    except WiggleError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
