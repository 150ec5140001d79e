"""The benchmark's workers of another program (`--worker-command`): a shell command per
process, its CPU counted with every process it starts, and the whole group stopped."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import psutil

from wiggle.bench._processes import running_shell, tree_cpu_seconds

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass\n"


def test_the_cpu_of_a_shell_command_counts_its_children_running_and_exited(tmp_path: Path):
    burn, done = tmp_path / "burn.py", tmp_path / "done"
    burn.write_text(BURN)
    # The shell waits for the burner (not an exec), then starts a sleeper of its own.
    sleeper = tmp_path / "sleeper"
    command = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(burn))}; "
        f"sleep 60 & echo $! > {shlex.quote(str(sleeper))}; "
        f'echo "$WIGGLE_X" > {shlex.quote(str(done))}; wait'
    )
    with running_shell(command, [{"WIGGLE_X": "given"}], grace_s=5) as [shell]:
        deadline = time.monotonic() + 20
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)  # the echo's write lands
        # The burner has exited: its 0.3 s are in the shell's children_* times now.
        assert tree_cpu_seconds([shell]) >= 0.25
        assert done.read_text().strip() == "given"
        sleeper_pid = int(sleeper.read_text())
    # SIGTERM reached the sleeper too, not only the shell (a zombie until something reaps it).
    assert shell.poll() is not None
    assert _ended(sleeper_pid, within_s=20)


def _ended(pid: int, within_s: float) -> bool:
    """Whether process `pid` ended (gone, or a zombie nobody reaped yet) within the time."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_a_running_child_counts_too(tmp_path: Path):
    burn = tmp_path / "burn.py"
    burn.write_text(BURN + "time.sleep(30)\n")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(burn))}; true"
    with running_shell(command, [{}], grace_s=5) as [shell]:
        deadline = time.monotonic() + 20
        while tree_cpu_seconds([shell]) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tree_cpu_seconds([shell]) >= 0.25
    assert shell.poll() is not None
