"""The suite's own set-up: what the commands it starts inherit from it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: A process started with SIGINT ignored (as a background job of a script is) takes SIGINT back
#: the way the suite does, starts a child, and prints the child's ignored-signals mask.
_CHILD_MASK = textwrap.dedent(
    """
    import signal, subprocess, sys
    sys.path.insert(0, sys.argv[1])
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    from tests.conftest import take_back_interrupt
    take_back_interrupt()
    status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True).stdout
    print(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1])
    """
)


def test_commands_started_by_a_suite_that_was_started_with_sigint_ignored_take_ctrl_c():
    # Ignored in the parent through `trap '' INT`, as a non-interactive shell does for `cmd &`.
    out = subprocess.run(
        ["sh", "-c", 'trap "" INT; exec "$0" -c "$1" "$2"', sys.executable, _CHILD_MASK, str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ignored = int(out.strip(), 16)
    assert not ignored & (1 << (2 - 1)), f"SIGINT still ignored in the child (SigIgn {out.strip()})"
