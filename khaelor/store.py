"""Where sessions live on disk, and how they are named and found (SPEC §10).

Layout under the sessions root (default `<data root>/sessions`):
`<workspace-key>/<session-id>.jsonl` plus a `.workspace` marker holding the
workspace path. Artifacts live under the data root in
`tool-output/<session-id>/`, `process-logs/<session-id>/` and
`snapshots/<session-id>/` (see `khaelor.artifacts`). Every folder is created
owner-private (0700), every file 0600.

Deleting is two steps: `trash` moves a log and its sidecar into the
workspace's `.trash/` (recoverable with `restore`); `purge` deletes a trashed
session for good, with everything kept under its id.

Session ids are time-sortable (`20261129T093012-481-3fa2c1`: UTC time, milliseconds, random), so the newest
session of a workspace is the greatest name. Ids may be abbreviated to any
unique prefix.
"""

import datetime
import fcntl
import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Callable

from khaelor.errors import UsageError
from khaelor.journal import lock_path, private_dir

LOG_SUFFIX = ".jsonl"
_ID_SHAPE = re.compile(r"^\d{8}T\d{6}-\d{3}-[0-9a-f]{6}$")


def new_session_id(clock: Callable[[], float]) -> str:
    """A fresh time-sortable session id."""
    moment = datetime.datetime.fromtimestamp(clock(), datetime.timezone.utc)
    return f"{moment:%Y%m%dT%H%M%S}-{moment.microsecond // 1000:03d}-{secrets.token_hex(3)}"


def is_session_id(name: str) -> bool:
    """Whether `name` has the shape of a session id."""
    return bool(_ID_SHAPE.match(name))


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

    def purge(self, trashed: Path):
        """Delete a trashed session for good; returns what was freed (an `artifacts.Freed`).

        Goes: the trashed log and sidecar, then the goal, lock file and repair
        backups left beside the workspace's logs, then the artifact folders — so
        a failure part-way leaves orphaned artifacts, which `sessions gc` finds.
        A live log with the same id keeps everything they share.
        """
        from khaelor import artifacts

        if trashed.parent.name != ".trash" or not is_session_id(trashed.stem) or trashed.suffix != LOG_SUFFIX:
            raise UsageError(f"{trashed} is not a trashed session")
        folder, session_id = trashed.parent.parent, trashed.stem
        doomed = [trashed, trashed.with_suffix(".json")]
        twin = self.live_log(session_id)
        if twin is None:
            doomed += [folder / ".goals" / f"{session_id}.json", lock_path(folder / trashed.name),
                       *sorted((folder / ".repair").glob(f"{session_id}.*.jsonl.bak"))]
        freed = artifacts.Freed([session_id], sum(_unlink(path) for path in doomed))
        if twin is None:
            freed.add(artifacts.remove_session(self.data_root, session_id))
        return freed

    def trashed_of(self, workspace: Path) -> list[Path]:
        """Trashed logs of one workspace, oldest first."""
        return _logs_in(self.workspace_dir(workspace) / ".trash")

    def all_trashed(self) -> list[Path]:
        """Trashed logs of every workspace, oldest first."""
        return sorted((log for folder in self._folders() for log in _logs_in(folder / ".trash")),
                      key=lambda log: log.stem)

    def known_ids(self) -> set[str]:
        """Ids of every session with a log, live or trashed."""
        return {log.stem for log in self.all_sessions() + self.all_trashed()}

    def live_log(self, session_id: str) -> Path | None:
        """The live log of `session_id` in any workspace, if there is one."""
        return next((log for folder in self._folders() if (log := folder / f"{session_id}{LOG_SUFFIX}").is_file()),
                    None)

    def in_use(self, session_id: str) -> bool:
        """Whether a running KHAELOR holds the lock of the session's live log (a non-blocking probe)."""
        log = self.live_log(session_id)
        return log is not None and _locked(lock_path(log))

    def _folders(self) -> list[Path]:
        return [folder for folder in self.root.iterdir() if folder.is_dir()] if self.root.is_dir() else []

    def find(self, workspace: Path, prefix: str) -> Path:
        """The session whose id starts with `prefix`: this workspace first, then all."""
        return _unique(prefix, (self.sessions_of(workspace), self.all_sessions()), "session")

    def find_in_trash(self, workspace: Path, prefix: str) -> Path:
        """The trashed session whose id starts with `prefix`: this workspace's trash first, then all."""
        return _unique(prefix, (self.trashed_of(workspace), self.all_trashed()), "trashed session")


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


def _unlink(path: Path) -> int:
    """Remove a file if it is there; returns its size (0 when it was not)."""
    try:
        size = path.lstat().st_size
        path.unlink()
    except FileNotFoundError:
        return 0
    return size


def _locked(lock: Path) -> bool:
    """Whether another process holds `lock` (a missing lock file is nobody's)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
