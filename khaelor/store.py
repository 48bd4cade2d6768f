"""Where sessions live on disk, and how they are named and found (SPEC §10).

Layout under the sessions root (default `<data root>/sessions`):
`<workspace-key>/<session-id>.jsonl` plus a `.workspace` marker holding the
workspace path. Artifacts live under the data root in
`tool-output/<session-id>/` and `process-logs/<session-id>/`. Every folder
is created owner-private (0700), every file 0600.

Session ids are time-sortable (`20261129T093012-481-3fa2c1`: UTC time, milliseconds, random), so the newest
session of a workspace is the greatest name. Ids may be abbreviated to any
unique prefix.
"""

import datetime
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Callable

from khaelor.errors import UsageError
from khaelor.journal import private_dir

LOG_SUFFIX = ".jsonl"
_ID_SHAPE = re.compile(r"^\d{8}T\d{6}-\d{3}-[0-9a-f]{6}$")


def new_session_id(clock: Callable[[], float]) -> str:
    """A fresh time-sortable session id."""
    moment = datetime.datetime.fromtimestamp(clock(), datetime.timezone.utc)
    return f"{moment:%Y%m%dT%H%M%S}-{moment.microsecond // 1000:03d}-{secrets.token_hex(3)}"


def workspace_key(workspace: Path) -> str:
    """A readable, stable, collision-safe folder name for a workspace path."""
    text = str(workspace)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[-48:].lstrip("-.") or "root"
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{slug}-{digest}"


class Store:
    """The sessions root and the artifact folders of one data root."""

    def __init__(self, sessions_root: Path, data_root: Path):
        self.root = sessions_root
        self.data_root = data_root

    def workspace_dir(self, workspace: Path, create: bool = False) -> Path:
        """The folder of a workspace's sessions (created with its marker on demand)."""
        folder = self.root / workspace_key(workspace)
        if create and not folder.is_dir():
            private_dir(folder)
            marker = folder / ".workspace"
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as handle:
                handle.write(str(workspace) + "\n")
        return folder

    def new_log_path(self, workspace: Path, session_id: str) -> Path:
        return self.workspace_dir(workspace, create=True) / f"{session_id}{LOG_SUFFIX}"

    def tool_output_dir(self, session_id: str) -> Path:
        return self.data_root / "tool-output" / session_id

    def process_log_dir(self, session_id: str) -> Path:
        return self.data_root / "process-logs" / session_id

    def sessions_of(self, workspace: Path) -> list[Path]:
        """Logs of one workspace, oldest first."""
        return _logs_in(self.workspace_dir(workspace))

    def all_sessions(self) -> list[Path]:
        """Logs of every workspace, oldest first."""
        if not self.root.is_dir():
            return []
        logs = [log for folder in self.root.iterdir() if folder.is_dir() for log in _logs_in(folder)]
        return sorted(logs, key=lambda log: log.stem)

    def latest(self, workspace: Path) -> Path | None:
        """The most recent session of a workspace, if any."""
        logs = self.sessions_of(workspace)
        return logs[-1] if logs else None

    def trash(self, log: Path) -> Path:
        """Move a session's log and sidecar into its workspace's `.trash/` (recoverable)."""
        folder = private_dir(log.parent / ".trash")
        target = folder / log.name
        if target.exists():
            raise UsageError(f"{log.stem} is already in the trash")
        os.rename(log, target)
        sidecar = log.parent / ".metadata" / f"{log.stem}.json"
        if sidecar.exists():
            os.rename(sidecar, folder / f"{log.stem}.json")
        return target

    def restore(self, trashed: Path) -> Path:
        """Move a trashed log and its sidecar back into its workspace folder."""
        folder = trashed.parent.parent
        target = folder / trashed.name
        if target.exists():
            raise UsageError(f"{trashed.stem} already exists outside the trash")
        sidecar = trashed.parent / f"{trashed.stem}.json"
        os.rename(trashed, target)
        if sidecar.exists():
            os.rename(sidecar, private_dir(folder / ".metadata") / sidecar.name)
        return target

    def find(self, workspace: Path, prefix: str) -> Path:
        """The session whose id starts with `prefix`: this workspace first, then all."""
        return _unique(prefix, (self.sessions_of(workspace), self.all_sessions()), "session")

    def find_in_trash(self, workspace: Path, prefix: str) -> Path:
        """The trashed session whose id starts with `prefix`: this workspace's trash first, then all."""
        here = _logs_in(self.workspace_dir(workspace) / ".trash")
        everywhere = [log for folder in (self.root.iterdir() if self.root.is_dir() else ()) if folder.is_dir()
                      for log in _logs_in(folder / ".trash")]
        return _unique(prefix, (here, everywhere), "trashed session")


def _unique(prefix: str, groups: tuple[list[Path], ...], what: str) -> Path:
    """The one log of the first group with a log named `prefix…`; clear errors when none or several."""
    prefix = prefix.strip()
    if not prefix or "/" in prefix or prefix.startswith("."):
        raise UsageError(f"not a session id: {prefix!r}")
    for logs in groups:
        matches = [log for log in logs if log.stem.startswith(prefix)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            shown = ", ".join(log.stem for log in matches[:5])
            more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
            raise UsageError(f"{what} id prefix {prefix!r} is ambiguous: {shown}{more}")
    raise UsageError(f"no {what} matches {prefix!r}", hint="list sessions in the store to find its id")


def _logs_in(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    logs = [p for p in folder.iterdir() if p.suffix == LOG_SUFFIX and _ID_SHAPE.match(p.stem)]
    return sorted(logs, key=lambda log: log.stem)
