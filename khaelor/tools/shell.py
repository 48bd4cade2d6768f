"""The `bash` tool, and how every tool runs a child process.

Owns the subprocess rules shared with `process` and `grep`: a child always
runs in a session of its own (so its whole process group can be killed), with
stdin closed and its output going to a private file rather than a pipe, so a
10 MB output never sits in memory whole. Waiting polls `ctx.cancel`; on a
timeout, a cancel or any exception arriving while we wait (KeyboardInterrupt,
SystemExit, an exception raised by a signal handler), the group is killed
before anything else happens. Output reaches the model decoded as UTF-8 with
replacement characters and bounded by `ctx.max_inline`; beyond that it stays
in a spill file and the model gets head, tail and the file's path.
"""

import codecs
import math
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import BinaryIO

from khaelor.errors import Cancelled
from khaelor.tools.base import Tool, ToolContext, ToolError

POLL_SECONDS = 0.05
KILL_GRACE = 1.0
"""Seconds a process group gets between SIGTERM and SIGKILL."""
HEAD_SHARE = 0.4
TAIL_SHARE = 0.4
CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def shell_argv(command: str) -> list[str]:
    """The argv running `command` through bash, or `sh` where there is no bash."""
    bash = "/bin/bash" if os.path.exists("/bin/bash") else shutil.which("bash")
    return [bash, "-c", command] if bash else ["sh", "-c", command]


def private_dir(path: Path) -> Path:
    """`path` as an existing directory only its owner can enter."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path, 0o700)
    except OSError as exc:
        raise ToolError(f"cannot create {path}: {exc.strerror}") from None
    return path


def open_private(path: Path) -> BinaryIO:
    """Create `path` (mode 0600, must not exist yet) and open it for writing."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")


def create_private_file(directory: Path, stem: str, suffix: str = ".log") -> tuple[Path, BinaryIO]:
    """A new 0600 file named after `stem` in the private `directory`, open for writing."""
    private_dir(directory)
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", stem) or "output"
    for n in range(1000):
        path = directory / (f"{stem}{suffix}" if n == 0 else f"{stem}-{n}{suffix}")
        try:
            return path, open_private(path)
        except FileExistsError:
            continue
        except OSError as exc:
            raise ToolError(f"cannot create {path}: {exc.strerror}") from None
    raise ToolError(f"cannot create a file for {stem} in {directory}")


def spawn(argv: list[str], cwd: Path, stdout: BinaryIO, stderr: BinaryIO | int = subprocess.STDOUT) -> subprocess.Popen:
    """Start `argv` in a new session with stdin closed and output to `stdout` (and `stderr`)."""
    if not cwd.is_dir():
        raise ToolError(f"working directory {cwd} does not exist")
    try:
        return subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True
        )
    except OSError as exc:
        raise ToolError(f"cannot run {argv[0]}: {exc.strerror}") from None


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE) -> None:
    """SIGTERM the child's process group, give the leader `grace` seconds, then SIGKILL the group."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    # Unconditional: members may survive the leader, and orphaned zombies (no
    # reaping init in containers) make "is the group empty?" unanswerable.
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def wait_child(proc: subprocess.Popen, ctx: ToolContext, timeout: float | None) -> bool:
    """Wait for `proc`; True when it ran out of time (its group is then killed).

    Raises `Cancelled` when `ctx.cancel` is set; any exception arriving while
    waiting kills the group before it propagates.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            try:
                proc.wait(timeout=POLL_SECONDS)
                return False
            except subprocess.TimeoutExpired:
                pass
            if ctx.cancel.is_set():
                raise Cancelled()
            if deadline is not None and time.monotonic() >= deadline:
                kill_group(proc)
                return True
    except BaseException:
        kill_group(proc)
        raise


def exit_fields(proc: subprocess.Popen) -> dict:
    """How a finished child ended, for a `process_exit` record."""
    code = proc.returncode
    if code is not None and code < 0:
        return {"signal": signal.Signals(-code).name if -code in signal.valid_signals() else -code}
    return {"exit_code": code}


def bounded_output(path: Path, ctx: ToolContext) -> tuple[str, bool]:
    """The output in `path` as text for the model, and whether the file must be kept as the spill."""
    size = path.stat().st_size
    # chars <= bytes <= 4 * chars, so both tests decide without decoding everything.
    if size <= 4 * ctx.max_inline:
        text = path.read_bytes().decode("utf-8", errors="replace")
        if len(text) <= ctx.max_inline:
            return text, False
    return head_and_tail(path, size, ctx.max_inline), True


def head_and_tail(path: Path, size: int, budget: int) -> str:
    """The first and last ~40% of `budget` bytes of a file around an omission marker naming it."""
    with open(path, "rb") as handle:
        head = handle.read(int(budget * HEAD_SHARE))
    tail_start = max(size - int(budget * TAIL_SHARE), len(head))
    tail = read_tail(path, tail_start)
    head_text = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=False)
    return f"{head_text}\n[… {tail_start - len(head)} bytes omitted; full output: {path}]\n{tail}"


def read_tail(path: Path, start: int) -> str:
    """The text of `path` from byte `start` on, without a character cut in half at the start."""
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read()
    return data.lstrip(CONTINUATION_BYTES).decode("utf-8", errors="replace")


def _parse_timeout(ctx: ToolContext, raw: object) -> float:
    if raw is None:
        return ctx.bash_timeout
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw <= 0:
        raise ToolError(f"timeout must be a positive number of seconds, got {raw!r}")
    return min(float(raw), ctx.bash_timeout)


def run_bash(ctx: ToolContext, args: dict) -> str:
    """Run `command` in the workspace; output inline or spilled, errors on non-zero exit."""
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("command must be a non-empty string")
    timeout = _parse_timeout(ctx, args.get("timeout"))
    spill, out = create_private_file(ctx.tool_output_dir, ctx.call_id or f"bash-{os.getpid()}")
    try:
        with out:
            proc = spawn(shell_argv(command), ctx.workspace, out)
    except ToolError:
        spill.unlink(missing_ok=True)
        raise
    ctx.record("process_start", {"call_id": ctx.call_id, "pid": proc.pid, "command": command})
    ended = {"call_id": ctx.call_id, "pid": proc.pid}
    try:
        timed_out = wait_child(proc, ctx, timeout)
    except BaseException as exc:
        ctx.record("process_exit", {**ended, **exit_fields(proc), "interrupted": type(exc).__name__})
        spill.unlink(missing_ok=True)
        raise
    ctx.record("process_exit", {**ended, **exit_fields(proc), **({"timed_out": True} if timed_out else {})})
    return _report(ctx, spill, proc.returncode, timed_out, timeout)


def _report(ctx: ToolContext, spill: Path, code: int, timed_out: bool, timeout: float) -> str:
    text, keep = bounded_output(spill, ctx)
    if not keep:
        spill.unlink(missing_ok=True)
    text = text or "(no output)"
    gap = "\n" if text.endswith("\n") else "\n\n"
    if timed_out:
        raise ToolError(f"{text}{gap}timed out after {timeout:g}s")
    if code != 0:
        raise ToolError(f"{text}{gap}exit code {code}")
    return text


BASH = Tool(
    name="bash",
    description=(
        "Run a shell command in the workspace with bash -c (stdin closed). Returns stdout and "
        "stderr merged; a non-zero exit code is an error. Long output is cut to its head and tail "
        "and saved to a file whose path is given. For servers or watchers use the process tool."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line to run."},
            "timeout": {
                "type": "number",
                "description": "Seconds before the command is killed; capped at the configured maximum (default 120).",
            },
        },
        "required": ["command"],
    },
    run=run_bash,
    mutates=True,
)
