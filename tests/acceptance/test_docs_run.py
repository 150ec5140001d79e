"""Docs that run: every `wiggle ...` command shown in README.md, docs/ and the headers of
definitions/ is executed (or, for a synopsis, checked against the parser), so an example can
never go stale.

What counts as a command:

- In Markdown, a line of a fenced `sh` / `bash` / `shell` / `console` block that starts with
  `wiggle` (after an optional `$ ` prompt and `NAME=value` assignments). Backslash continuations
  are joined. These run, in order, one session per file. Two shell forms are understood too:
  `for n in $(seq 1 50); do wiggle ... $n ...; done` runs its command once per number, and
  `kill %N` stops the session's Nth background job (a command ending in `&`).
- In a flow of definitions/, a line of the leading comment block that starts with `wiggle`
  (continuations joined). These run, one session per flow file.
- An inline code span starting with `wiggle` (Markdown text, or a header comment) is a synopsis,
  often with placeholders (`wiggle render FLOW -o OUT`): its subcommand and every option it names
  must exist. So must those of `wiggle bench` and `wiggle conformance` lines, which are checked
  rather than run (they take minutes).

How a session runs: in a temporary directory holding a copy of definitions/, with WIGGLE_ADDRESS
set to a free loopback port. A command ending in `&` runs in the background until the session
ends; so do `wiggle server`, `worker` and `console`, with or without `&` (each is waited for
until it says it is up). When a
session talks to a server without starting one, the test starts one. A command must exit 0
unless its line ends with a comment `# exits N`; one that stays open until Ctrl-C (`wiggle run
--console`) gets its Ctrl-C when it says so.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from wiggle._ports import free_port

ROOT = Path(__file__).resolve().parents[2]

#: Subcommands that need a server to talk to.
CLIENT = frozenset(
    {
        "deploy",
        "start",
        "signal",
        "cancel",
        "status",
        "list",
        "wait",
        "workers",
        "retry",
        "reset",
        "batch",
        "schedule",
    }
)
#: Checked, not run: they take minutes and print benchmark figures.
NOT_RUN = frozenset({"bench", "conformance"})
#: Long-running ones, and the stderr text that says they are up.
READY = {"server": "listening on", "worker": " serving ", "console": "http://"}

#: What a command that waits for Ctrl-C says when it is done.
INTERACTIVE = "Ctrl-C to quit"

_FENCE = re.compile(r"^```\s*(\w*)\s*$")
_INLINE = re.compile(r"`(wiggle [^`]+)`")
_EXPECT = re.compile(r"#\s*exits?\s+(\d+)\s*$")


@dataclass
class Command:
    file: str
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass
class Session:
    file: str
    commands: list[Command] = field(default_factory=list)
    synopses: list[Command] = field(default_factory=list)


def _join_continuations(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, text in lines:
        if pending is not None:
            number, text = pending[0], pending[1] + " " + text.strip()
            pending = None
        if text.rstrip().endswith("\\"):
            pending = (number, text.rstrip()[:-1].rstrip())
            continue
        out.append((number, text))
    if pending is not None:
        out.append(pending)
    return out


#: `for n in $(seq 1 50); do wiggle ...; done`: the command runs once per number, `$n` replaced.
_LOOP = re.compile(
    r"^for\s+(?P<var>[a-z_]+)\s+in\s+\$\(seq\s+(?P<first>\d+)\s+(?P<last>\d+)\);\s*do\s+"
    r"(?P<body>.+?);\s*done(?P<tail>\s*(#.*)?)$"
)
#: `kill %N`: stop the session's Nth background job (`... &`), as a shell would.
_KILL = re.compile(r"^kill\s+%(\d+)\s*$")


def _command_of(text: str) -> str | None:
    text = text.strip()
    if text.startswith("$ "):
        text = text[2:].strip()
    if _KILL.match(text):
        return text
    loop = _LOOP.match(text)
    if loop is not None:
        return text if _command_of(loop.group("body")) is not None else None
    words = text.split()
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]
    return text if words[:1] == ["wiggle"] else None


def _markdown(path: Path) -> Session:
    rel = str(path.relative_to(ROOT))
    session = Session(rel)
    in_block = False
    runnable = False
    block: list[tuple[int, str]] = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        fence = _FENCE.match(text.strip())
        if fence:
            if in_block:
                for n, line in _join_continuations(block):
                    command = _command_of(line)
                    if command is not None:
                        session.commands.append(Command(rel, n, command))
                in_block, block = False, []
            else:
                in_block, runnable = True, fence.group(1) in {"sh", "bash", "shell", "console"}
            continue
        if in_block:
            if runnable:
                block.append((number, text))
            continue
        for found in _INLINE.finditer(text):
            session.synopses.append(Command(rel, number, found.group(1)))
    return session


def _flow_header(path: Path) -> Session:
    rel = str(path.relative_to(ROOT))
    session = Session(rel)
    header: list[tuple[int, str]] = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if not text.startswith("#"):
            break
        header.append((number, text[1:]))
    for number, text in header:
        for found in _INLINE.finditer(text):
            session.synopses.append(Command(rel, number, found.group(1)))
    for number, text in _join_continuations(header):
        command = _command_of(text)
        if command is not None:
            session.commands.append(Command(rel, number, command))
    return session


def sessions() -> list[Session]:
    found = [_markdown(ROOT / "README.md")]
    found += [_markdown(p) for p in sorted((ROOT / "docs").rglob("*.md"))]
    found += [_flow_header(p) for p in sorted((ROOT / "definitions").glob("*.yaml"))]
    return [s for s in found if s.commands or s.synopses]


# -- synopsis checks ------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def check_synopsis(command: Command) -> str | None:
    """None when the subcommand and every option named exist, else what is wrong."""
    import argparse

    from wiggle.cli import build_parser

    words = _words(command.text)[1:]
    parser: argparse.ArgumentParser = build_parser()
    path = ["wiggle"]
    while words and not words[0].startswith("-"):
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or words[0] not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[words[0]]
        path.append(words.pop(0))
    if len(path) == 1 and words and re.fullmatch(r"[A-Z_]+", words[0]):
        # `wiggle COMMAND --help`: a placeholder command; its options must exist on every one.
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        commands = list(subparsers[0].choices.values())
        for word in words[1:]:
            option = word.split("=", 1)[0]
            if word.startswith("--") and not all(
                option in c._option_string_actions for c in commands
            ):
                return f"{command.where}: `{command.text}`: not every command has {option}"
        return None
    if len(path) == 1:
        return f"{command.where}: `{command.text}`: no such wiggle command"
    for word in words:
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            if option not in parser._option_string_actions:
                return f"{command.where}: `{command.text}`: {' '.join(path)} has no {option}"
    return None


# -- running --------------------------------------------------------------------------------------


def _free_port() -> int:
    return free_port()


class Runner:
    """One session's directory, environment and background processes."""

    def __init__(self, tmp: Path) -> None:
        self.cwd = tmp
        shutil.copytree(ROOT / "definitions", tmp / "definitions")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("WIGGLE_")}
        self.env["PYTHONIOENCODING"] = "utf-8"
        self.env["WIGGLE_ADDRESS"] = f"127.0.0.1:{_free_port()}"
        self.env["WIGGLE_CONSOLE_LISTEN"] = f"127.0.0.1:{_free_port()}"
        self.background: list[tuple[Command, subprocess.Popen[bytes], Path]] = []
        self.killed: list[subprocess.Popen[bytes]] = []  # stopped by `kill %N`
        self.has_server = False

    def _start(self, command: Command, words: list[str], env: dict[str, str]) -> None:
        log = self.cwd / f"bg-{len(self.background)}.log"
        with open(log, "wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "wiggle", *words],
                cwd=self.cwd,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        self.background.append((command, proc, log))
        ready = READY.get(words[0])
        if ready is None:
            return
        deadline = time.monotonic() + 60
        while ready not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"{command.where}: `{command.text}` did not come up:\n"
                    + log.read_text(errors="replace")
                )
            time.sleep(0.1)

    def ensure_server(self) -> None:
        if not self.has_server:
            self.has_server = True
            self._start(Command("(test)", 0, "wiggle server &"), ["server"], self.env)

    def run(self, command: Command) -> None:
        killed = _KILL.match(command.text)
        if killed is not None:
            self._kill(command, int(killed.group(1)))
            return
        loop = _LOOP.match(command.text)
        if loop is not None:
            var = loop.group("var")
            for n in range(int(loop.group("first")), int(loop.group("last")) + 1):
                body = loop.group("body").replace("${" + var + "}", str(n))
                body = body.replace("$" + var, str(n))
                self.run(Command(command.file, command.line, body + loop.group("tail")))
            return
        expected = 0
        found = _EXPECT.search(command.text)
        if found:
            expected = int(found.group(1))
        words = _words(command.text)
        background = words[-1:] == ["&"]
        if background:
            words = words[:-1]
        env = dict(self.env)
        while words and "=" in words[0] and words[0] != "wiggle":
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        words = words[1:]  # "wiggle"
        if not words or words[0] in NOT_RUN:
            return
        if words[0] == "server":
            self.has_server = True
        if words[0] in CLIENT:
            self.ensure_server()
        if background or words[0] in READY:  # a server shown in the foreground runs on
            self._start(command, words, env)
            return
        code, out, err = self._foreground(words, env)
        if code != expected:
            pytest.fail(
                f"{command.where}: `{command.text}` exited {code}, expected "
                f"{expected}\n--- stdout\n{out}--- stderr\n{err}"
            )

    def _foreground(self, words: list[str], env: dict[str, str]) -> tuple[int, str, str]:
        """Run to the end; a command that stays open until Ctrl-C (`wiggle run --console`)
        gets its Ctrl-C once it says so, and then counts as having exited 0."""
        out_path, err_path = self.cwd / "fg.out", self.cwd / "fg.err"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "wiggle", *words],
                cwd=self.cwd,
                env=env,
                stdout=out,
                stderr=err,
            )
        deadline = time.monotonic() + 180
        interrupted = False
        while proc.poll() is None:
            said = out_path.read_text(errors="replace") + err_path.read_text(errors="replace")
            if not interrupted and INTERACTIVE in said:
                proc.send_signal(signal.SIGINT)
                interrupted = True
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                break
            time.sleep(0.1)
        code = proc.wait()
        if interrupted and code in (0, 130):
            code = 0
        return code, out_path.read_text(errors="replace"), err_path.read_text(errors="replace")

    def _kill(self, command: Command, job: int) -> None:
        """Stop background job `job` (1 is the session's first `... &`) and wait for it."""
        # Numbered as a shell numbers them: in the order started, never renumbered.
        jobs = [
            b for b in self.background if b[0].file != "(test)" and b[0].text.rstrip().endswith("&")
        ]
        if not 1 <= job <= len(jobs) or jobs[job - 1][1].poll() is not None:
            pytest.fail(f"{command.where}: `{command.text}`: there is no job {job} running")
        job_command, proc, _log = jobs[job - 1]
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"{command.where}: job {job} (`{job_command.text}`) did not stop")
        self.killed.append(proc)

    def close(self) -> None:
        problems = []
        for command, proc, log in reversed(self.background):
            if proc in self.killed:
                continue
            # Ended by our SIGTERM is fine (`wiggle console` does not trap it); ended on its
            # own, it must have exited 0.
            stopped_by_us = (0, -signal.SIGTERM) if proc.poll() is None else (0,)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = -9
            if code not in stopped_by_us:
                text = log.read_text(errors="replace")
                problems.append(f"{command.where}: `{command.text}` exited {code}:\n{text}")
        if problems:
            pytest.fail("\n".join(problems))


ALL = sessions()


def test_the_docs_show_commands():
    """The extraction itself: the files named here do show runnable commands."""
    runnable = {s.file for s in ALL if s.commands}
    assert "README.md" in runnable
    assert "definitions/customer-onboarding.yaml" in runnable
    assert "definitions/invoice-approval.yaml" in runnable
    assert "docs/schedules.md" in runnable


@pytest.mark.parametrize("session", ALL, ids=[s.file for s in ALL])
def test_docs_run(session: Session, tmp_path: Path) -> None:
    problems = [p for p in map(check_synopsis, session.synopses) if p is not None]
    problems += [
        p
        for c in session.commands
        if _words(c.text)[1:2] and _words(c.text)[1] in NOT_RUN
        for p in [check_synopsis(c)]
        if p is not None
    ]
    assert problems == []
    runner = Runner(tmp_path)
    try:
        for command in session.commands:
            runner.run(command)
    finally:
        runner.close()
