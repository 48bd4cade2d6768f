"""The `process` tool: background processes (dev servers, watchers) of a session.

Owns the table in `ctx.extras["processes"]` (id → `Background`). Each process
runs in a session of its own, stdin closed, stdout and stderr going to
`ctx.process_log_dir/<id>.log` (0600). Ids are `p1`, `p2`, … and never name a
log already in the directory, so a resumed session cannot overwrite an old log.
Every start is journaled as `process_start`, and every end exactly once as
`process_exit`: by a watcher thread when the process ends by itself, or by
`stop` (with `"stopped": true`). Nothing is restarted on its own.
"""

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from khaelor.tools.base import Tool, ToolContext, ToolError
from khaelor.tools.shell import exit_fields, kill_group, open_private, private_dir, read_tail, shell_argv, spawn

ACTIONS = ("start", "list", "log", "stop")


@dataclass
class Background:
    """One background process started by the `process` tool."""

    id: str
    command: str
    log: Path
    proc: subprocess.Popen
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _exit_claimed: bool = False

    def running(self) -> bool:
        """Whether the process has not ended yet."""
        # returncode, not poll(): the watcher thread owns the wait.
        return self.proc.returncode is None

    def status(self) -> str:
        """One of: running, exit N, killed by SIGNAME."""
        fields = exit_fields(self.proc)
        if self.running():
            return "running"
        return f"exit {fields['exit_code']}" if "exit_code" in fields else f"killed by {fields['signal']}"

    def claim_exit(self) -> bool:
        """True for the first caller only: that caller journals the exit."""
        with self._lock:
            claimed, self._exit_claimed = self._exit_claimed, True
        return not claimed


def table(ctx: ToolContext) -> dict[str, Background]:
    """The session's background processes, by id."""
    return ctx.extras.setdefault("processes", {})


def start(ctx: ToolContext, command: str) -> Background:
    """Start `command` in the background and journal it; a watcher journals its own exit."""
    log_dir = private_dir(ctx.process_log_dir)
    entry_id, log, out = _new_log(ctx, log_dir)
    try:
        with out:
            proc = spawn(shell_argv(command), ctx.workspace, out)
    except ToolError:
        log.unlink(missing_ok=True)
        raise
    entry = Background(entry_id, command, log, proc)
    table(ctx)[entry_id] = entry
    ctx.record("process_start", {"id": entry_id, "pid": proc.pid, "command": command, "log": str(log)})
    threading.Thread(target=_watch, args=(ctx, entry), name=f"khaelor-{entry_id}", daemon=True).start()
    return entry


def _new_log(ctx: ToolContext, log_dir: Path) -> tuple[str, Path, BinaryIO]:
    n = len(table(ctx))
    while True:
        n += 1
        path = log_dir / f"p{n}.log"
        if f"p{n}" in table(ctx):
            continue
        try:
            return f"p{n}", path, open_private(path)
        except FileExistsError:
            continue
        except OSError as exc:
            raise ToolError(f"cannot create {path}: {exc.strerror}") from None


def _watch(ctx: ToolContext, entry: Background) -> None:
    entry.proc.wait()
    if entry.claim_exit():
        ctx.record("process_exit", {"id": entry.id, "pid": entry.proc.pid, **exit_fields(entry.proc)})


def stop(ctx: ToolContext, entry: Background) -> bool:
    """Kill the process group of `entry` and journal it; False when it had already ended."""
    if not entry.claim_exit():
        return False
    kill_group(entry.proc)
    ctx.record("process_exit", {"id": entry.id, "pid": entry.proc.pid, **exit_fields(entry.proc), "stopped": True})
    return True


def stop_background(ctx: ToolContext) -> list[str]:
    """Stop every running background process of the session (at session end); their ids."""
    return [entry.id for entry in list(table(ctx).values()) if entry.running() and stop(ctx, entry)]


def run_process(ctx: ToolContext, args: dict) -> str:
    """Dispatch one `process` call."""
    action = args.get("action")
    if action not in ACTIONS:
        raise ToolError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    if action == "start":
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("start needs command, a non-empty string")
        entry = start(ctx, command)
        return f"started {entry.id} (pid {entry.proc.pid}); log: {entry.log}"
    if action == "list":
        return list_processes(ctx)
    entry = _lookup(ctx, args.get("id"), action)
    if action == "log":
        return log_tail(entry, ctx.max_inline)
    if stop(ctx, entry):
        return f"stopped {entry.id} (pid {entry.proc.pid}, {entry.status()})"
    return f"{entry.id} had already ended ({entry.status()})"


def _lookup(ctx: ToolContext, entry_id: object, action: str) -> Background:
    if not isinstance(entry_id, str) or not entry_id:
        raise ToolError(f"{action} needs id, e.g. p1")
    entry = table(ctx).get(entry_id)
    if entry is None:
        known = ", ".join(table(ctx)) or "none"
        raise ToolError(f"no background process {entry_id!r} in this session (known: {known})")
    return entry


def list_processes(ctx: ToolContext) -> str:
    """One line per background process: id, pid, status, age, command."""
    if not table(ctx):
        return "no background processes"
    now = time.monotonic()
    rows = [f"{'id':<5} {'pid':>7}  {'status':<18} {'age':>7}  command"]
    for entry in table(ctx).values():
        command = entry.command if "\n" not in entry.command else repr(entry.command)
        age = _age(now - entry.started)
        rows.append(f"{entry.id:<5} {entry.proc.pid:>7}  {entry.status():<18} {age:>7}  {command[:200]}")
    return "\n".join(rows)


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def log_tail(entry: Background, budget: int) -> str:
    """The last `budget` bytes of the process's log, under a line naming it and its status."""
    header = f"{entry.id} ({entry.status()}), log {entry.log}:"
    try:
        size = entry.log.stat().st_size
        start_at = max(size - budget, 0)
        text = read_tail(entry.log, start_at)[-budget:]
    except OSError as exc:
        raise ToolError(f"cannot read {entry.log}: {exc.strerror}") from None
    if start_at:
        header += f"\n[… {start_at} earlier bytes not shown]"
    return f"{header}\n{text or '(no output yet)'}"


PROCESS = Tool(
    name="process",
    description=(
        "Manage background processes such as dev servers and watchers. action=start runs command "
        "in the workspace and returns its id; list shows all with status; log shows the tail of "
        "one's output; stop kills it and its children."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(ACTIONS), "description": "What to do."},
            "command": {"type": "string", "description": "Shell command to start (action=start)."},
            "id": {"type": "string", "description": "Process id such as p1 (action=log or stop)."},
        },
        "required": ["action"],
    },
    run=run_process,
    mutates=True,
)
