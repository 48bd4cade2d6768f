"""Who changed which file: the session baseline and the tool-call watcher (SPEC §6, §9).

`attach(session, store, environ)` runs once when a runtime starts. For a new
session it records the `baseline`: a git snapshot when the workspace is in a
work tree and git runs (`gitbase`), else the file-state fallback
(`filesnapshot`) with the reason. For a resumed session it takes the
`ChangeHistory` the replay folded (`SessionState.changes`; the log is not read
again), reopens the same backend, and settles a call that a dead run left
without its closing snapshot: whatever changed since that call began is
journaled as the call's, marked `interrupted`.

The returned `Tracker` is an agent watcher. Around every approved call that
can change files (write, edit, bash, process start) it takes a snapshot
before and after: the difference across the call is journaled as the
agent's, the difference since the previous snapshot as someone else's
(`outside`). A snapshot that fails — or any fault in the tracking itself —
never fails the call: it is journaled as an `attribution_gap`, and tracking
starts again from a fresh baseline at the next call. The history is part of
the session state, folded by `SessionState.apply`, so live state and replayed
state come from the same records.

Snapshot state (private index, kept pre-images) lives in the session's folder
`<data root>/snapshots/<session-id>/` (0700).
"""

from pathlib import Path
from typing import Protocol

from khaelor.changes import Blob, Change, ChangeHistory, SnapshotError, is_tracked
from khaelor.filesnapshot import FileSnapshots
from khaelor.gitbase import GitSnapshots, NoRepository, Repo
from khaelor.journal import private_dir, read_log
from khaelor.session import Session
from khaelor.store import Store


class Backend(Protocol):
    """How snapshots are taken and contents read: `GitSnapshots` or `FileSnapshots`."""

    kind: str
    root: Path

    def snapshot(self) -> str: ...
    def diff(self, old: str, new: str) -> list[Change]: ...
    def facts(self, snapshot: str) -> dict: ...
    def keep(self, snapshot: str) -> None: ...
    def restore(self, history: ChangeHistory) -> bool: ...
    def current(self, paths: list[str]) -> dict[str, str | None]: ...
    def blobs(self, oids: list[str], limit: int) -> dict[str, Blob]: ...


def snapshot_dir(store: Store, session_id: str) -> Path:
    """The session's snapshot folder (private index, pre-images, manifests)."""
    return store.data_root / "snapshots" / session_id


def attach(session: Session, store: Store, environ: dict[str, str]) -> "Tracker":
    """Start or resume change tracking for `session`; returns the watcher to give the agent."""
    history = session.state.changes
    folder = private_dir(private_dir(store.data_root / "snapshots") / session.id)
    exclude = [store.root, store.data_root]
    backend = open_backend(history.baseline, session.workspace, folder, exclude, environ)
    tracker = Tracker(session, backend, history)
    tracker.start()
    return tracker


def open_backend(baseline: dict | None, workspace: Path, folder: Path, exclude: list[Path],
                 environ: dict[str, str]) -> Backend:
    """The backend a baseline names, or for a new session git when possible, else the fallback."""
    if baseline is not None and baseline.get("backend") == "git":
        repo = Repo(Path(baseline["root"]), environ)
        return GitSnapshots(repo, folder, exclude, baseline.get("skipped") or [])
    if baseline is not None:
        return FileSnapshots(Path(baseline["root"]), folder, exclude, baseline.get("reason", ""))
    try:
        return GitSnapshots(Repo.find(workspace, environ), folder, exclude)
    except NoRepository as why:
        return FileSnapshots(workspace, folder, exclude, str(why))


class Tracker:
    """Snapshots around each approved tool call that can change files."""

    def __init__(self, session: Session, backend: Backend, history: ChangeHistory):
        self.session = session
        self.backend = backend
        self.history = history

    def start(self) -> None:
        """Record the baseline of a new session, or pick up where a resumed one left off."""
        if self.history.baseline is None:
            self._baseline("start")
            return
        restored = self.history.reference is not None and self._restore()
        for call_id, name in list(self.history.open_calls.items()):
            if restored:
                self._step(call_id, "agent", tool=name, interrupted=True)
            else:
                self._gap(call_id, "after", "the session ended during this call and its starting snapshot is lost")
        if not restored:
            self._baseline("resume")

    def before(self, call_id: str, name: str, arguments) -> None:
        """Journal what changed since the last snapshot as someone else's."""
        if is_tracked(name, arguments):
            self._step(call_id, "outside")

    def after(self, call_id: str, name: str, arguments) -> None:
        """Journal what changed during the call as the agent's."""
        if is_tracked(name, arguments):
            self._step(call_id, "agent", tool=name)

    def _step(self, call_id: str, by: str, **extra) -> None:
        if self.history.reference is None:
            self._baseline("reset", call_id)
            return
        reference, phase = self.history.reference, "after" if by == "agent" else "before"
        taken = self._attempt(call_id, phase, lambda: self._changes_since(reference))
        if taken is None:
            return
        snapshot, changes = taken
        if changes or by == "agent":
            self.session.record("tree_changes", call_id=call_id, by=by, **extra, **{"from": reference},
                                to=snapshot, changes=[change.as_record() for change in changes])

    def _changes_since(self, reference: str) -> tuple[str, list[Change]]:
        snapshot = self.backend.snapshot()
        return snapshot, self.backend.diff(reference, snapshot)

    def _baseline(self, at: str, call_id: str | None = None) -> None:
        taken = self._attempt(call_id, at, self._kept_snapshot)
        if taken is None:
            return
        snapshot, facts = taken
        self.session.record("baseline", backend=self.backend.kind, root=str(self.backend.root), snapshot=snapshot,
                            at=at, **({"call_id": call_id} if call_id else {}), **facts)

    def _kept_snapshot(self) -> tuple[str, dict]:
        snapshot = self.backend.snapshot()
        self.backend.keep(snapshot)
        return snapshot, self.backend.facts(snapshot)

    def _attempt(self, call_id: str | None, phase: str, work):
        """`work()`, or None after journaling its failure as a gap — tracking never costs the person a tool call.

        An interrupt (Ctrl-C, SIGTERM) is journaled too, so the call is not
        left looking unfinished, and then goes on.
        """
        try:
            return work()
        except BaseException as exc:
            self._gap(call_id, phase, _reason(exc))
            if not isinstance(exc, Exception):
                raise
            return None

    def _restore(self) -> bool:
        try:
            return self.backend.restore(self.history)
        except Exception:  # not restorable, for whatever reason: start from a fresh baseline
            return False

    def _gap(self, call_id: str | None, phase: str, reason: str) -> None:
        self.session.record("attribution_gap", call_id=call_id, phase=phase, reason=reason)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SnapshotError):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}"
    if not isinstance(exc, Exception):
        return f"interrupted ({getattr(exc, 'signal_name', type(exc).__name__)}) while taking a snapshot"
    return f"internal error in change tracking: {type(exc).__name__}: {exc}"


def tracker_of(watchers: list) -> Tracker | None:
    """The change tracker among an agent's watchers."""
    return next((w for w in watchers if isinstance(w, Tracker)), None)


def open_reader(log: Path, store: Store, environ: dict[str, str]) -> tuple[ChangeHistory, Backend | None]:
    """The folded change records of a session log, and a backend to read its contents (None without a baseline)."""
    history = ChangeHistory.from_records(read_log(log).records)
    if history.baseline is None:
        return history, None
    root = Path(history.baseline["root"])
    return history, open_backend(history.baseline, root, snapshot_dir(store, log.stem), [], environ)
