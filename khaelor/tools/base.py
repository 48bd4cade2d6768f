"""The contract between the agent loop and the tools.

A tool is a name, a description, a JSON input schema and a `run(ctx, input)`
function returning text for the model. Tools never prompt and never print:
they raise `ToolError` for a failure the model should see (it becomes an
`is_error` tool result), report side effects through `ctx.record(...)` so the
journal sees them as they happen, and stop promptly when `ctx.cancel` is set
or a KeyboardInterrupt/`Cancelled` arrives (killing any child process group
before re-raising).
"""

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from khaelor.filestate import FileState


class ToolError(Exception):
    """A failure reported to the model as an `is_error` tool result."""


@dataclass
class ToolContext:
    """What a running tool may use. One per session; shared by all calls."""

    workspace: Path
    """The directory the session works in; relative paths resolve against it."""
    session_id: str
    tool_output_dir: Path
    """Where output too long to give inline is spilled (created on first use, 0700)."""
    process_log_dir: Path
    """Where background processes write their logs (created on first use, 0700)."""
    file_state: FileState = field(default_factory=FileState)
    record: Callable[[str, dict], None] = lambda kind, fields: None
    """Journal a side record now, e.g. record("file_read", {...})."""
    bash_timeout: float = 120.0
    """Default and maximum seconds for a bash command unless the call asks for less."""
    max_inline: int = 30_000
    """Characters of tool output given to the model inline; the rest is spilled."""
    cancel: threading.Event = field(default_factory=threading.Event)
    call_id: str = ""
    """The id of the tool call being run, for records that refer to it."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Per-session objects a tool module owns (e.g. the background process table)."""

    def resolve(self, raw: str) -> Path:
        """An absolute path for a path argument: `~` expanded, relative to the workspace."""
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = self.workspace / path
        return Path(_normalize(path))


def _normalize(path: Path) -> str:
    import os.path

    return os.path.normpath(str(path))


@dataclass(frozen=True)
class Tool:
    """One tool the model may call."""

    name: str
    description: str
    input_schema: dict
    run: Callable[[ToolContext, dict], str]
    mutates: bool
    """Whether the tool can change files or run programs (used by permissions)."""

    def definition(self) -> dict:
        """The tool as the Messages API wants it."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}
