"""Negative controls for the TypeScript worker (sdk/typescript): the corpus must fail it too when
one protocol rule is broken.

sdk/typescript/test/broken-worker.ts breaks the same rules in the TypeScript worker that
broken_worker.py breaks in the Python one, where the rule applies to it; each control runs the
same cases and modes and requires the same evidence (test_negative_controls.CONTROLS).

Only `bash scripts/corpus.sh` runs them: the rules are judged by the runner, the same code for
every worker, and scripts/test.sh proves each control's evidence with the Python broken worker.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conformance.broken_worker import FLAWS
from tests.conformance.test_negative_controls import CONTROLS
from wiggle.conformance import RunnerOptions, format_table, load_cases, run_corpus, summarise

SDK = Path(__file__).resolve().parents[2] / "sdk/typescript"
BROKEN = SDK / "build/test/broken-worker.js"

#: Flaws of broken_worker.py that have no counterpart in the TypeScript worker, and why.
NOT_APPLICABLE = {
    "retries-results-too-deep-to-encode": "its encoder stops at the depth limit; one without "
    "that stop overflows only thousands of levels deep, which no case reaches (the SDK's "
    "test/protocol.test.ts checks 5,000 and 100,000 levels)",
}
TS_CONTROLS = [p for p in CONTROLS if p.values[0] not in NOT_APPLICABLE]

pytestmark = pytest.mark.corpus_full(
    "tests/conformance/test_negative_controls.py::test_the_corpus_fails_a_broken_worker"
)


@pytest.fixture(scope="module")
def broken_worker() -> Path:
    """The TypeScript broken worker, compiled from the checkout's sources."""
    npm = shutil.which("npm")
    assert npm, "npm is needed for the TypeScript worker (bash scripts/setup.sh installs it)"
    assert (SDK / "node_modules").is_dir(), "run `npm ci` in sdk/typescript (bash scripts/setup.sh)"
    subprocess.run([npm, "run", "-s", "build:test"], cwd=SDK, check=True)
    return BROKEN


def test_it_breaks_every_rule_the_python_controls_break(broken_worker: Path) -> None:
    listed = subprocess.run(
        ["node", str(broken_worker), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    assert set(listed) == set(FLAWS) - set(NOT_APPLICABLE)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("flaw", "cases", "modes", "evidence"), TS_CONTROLS)
def test_the_corpus_fails_a_broken_typescript_worker(
    broken_worker: Path, flaw: str, cases: str, modes: list[str], evidence: list[str]
) -> None:
    rows = summarise(
        run_corpus(
            load_cases(cases),
            RunnerOptions(
                modes=modes,
                databases=["sqlite"],
                worker=f"node {shlex.quote(str(broken_worker))} {flaw}",
            ),
        )
    )
    failed = [r for r in rows if not r.passed]
    assert failed, (
        f"the corpus passed a TypeScript worker that {FLAWS[flaw]}:\n{format_table(rows)}"
    )
    problems = "\n".join(p for r in failed for p in r.problems)
    for phrase in evidence:
        assert phrase in problems, f"{phrase!r} not among the problems:\n{format_table(failed)}"
