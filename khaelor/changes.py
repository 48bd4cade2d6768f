"""What the agent changed: the fold of the change records and the net change per file (SPEC §6, §9).

Pure data, no I/O. `attribution` journals these records; `ChangeHistory.apply` folds
them — live (as a journal listener) and on replay alike, so a resumed session
knows exactly what the first run knew:

* `baseline`        {backend, root, snapshot, at, …facts}: the state of the
  tree when tracking (re)started; the first one is the session's baseline.
* `tree_changes`    {call_id, by, tool?, from, to, changes, interrupted?}:
  what changed between two snapshots. `by` is `agent` for a difference
  across one tool call, `outside` for one between calls (the person, an
  editor, a background process). Each change is {path, before, after,
  before_mode, after_mode}; an absent side is null.
* `attribution_gap` {call_id, phase, reason}: a snapshot failed; nothing is
  attributed until the next `baseline`.

`net_changes` turns a history into one `FileChange` per file the agent
changed: its own edits from the content before it first touched the file,
with any stretch edited by someone else in between left out (the agent's
work is then shown in parts), and renames paired up.
"""

from dataclasses import dataclass, field
from typing import Callable

ABSENT_MODE = "000000"
RENAME_SIMILARITY = 0.5
MAX_RENAME_PAIRS = 400
"""Beyond this many deleted × created pairs, only identical content makes a rename."""


class SnapshotError(Exception):
    """A snapshot or a content lookup failed; the message is one line for the person."""


@dataclass(frozen=True)
class Version:
    """One version of one file: its git-style mode and the id of its content."""

    mode: str
    oid: str


@dataclass(frozen=True)
class Change:
    """A path whose version differs between two snapshots (None: absent)."""

    path: str
    before: Version | None
    after: Version | None

    def as_record(self) -> dict:
        return {"path": self.path, **_sides("before", self.before), **_sides("after", self.after)}

    @classmethod
    def from_record(cls, data: dict) -> "Change":
        return cls(data["path"], _version(data, "before"), _version(data, "after"))


def _sides(name: str, version: Version | None) -> dict:
    return {name: version.oid if version else None, f"{name}_mode": version.mode if version else None}


def _version(data: dict, name: str) -> Version | None:
    oid = data.get(name)
    return Version(data.get(f"{name}_mode") or "100644", oid) if oid else None


@dataclass(frozen=True)
class Blob:
    """Stored content of a version: `data` is None when too large or not kept."""

    data: bytes | None
    size: int | None


def is_tracked(name: str, arguments) -> bool:
    """Whether a tool call can change files: write, edit, bash, and process start."""
    if name == "process":
        return isinstance(arguments, dict) and arguments.get("action") == "start"
    return name in ("write", "edit", "bash")


@dataclass(frozen=True)
class Touch:
    """One change to one path, and who made it."""

    by: str
    before: Version | None
    after: Version | None
    interrupted: bool = False


@dataclass
class ChangeHistory:
    """Everything the change records of one session say."""

    baseline: dict | None = None
    reference: str | None = None
    """The snapshot the next difference is taken against (None after a gap)."""
    anchor: str | None = None
    """The snapshot of the latest `baseline` record."""
    since_anchor: list[list[Change]] = field(default_factory=list)
    touches: dict[str, list[Touch]] = field(default_factory=dict)
    gaps: list[dict] = field(default_factory=list)
    open_calls: dict[str, str] = field(default_factory=dict)
    """Calls that can change files, started, and without their closing record: id → tool name."""
    _requests: dict[str, tuple[str, object]] = field(default_factory=dict)

    @classmethod
    def from_records(cls, records: list[dict]) -> "ChangeHistory":
        history = cls()
        for record in records:
            history.apply(record)
        return history

    def apply(self, record: dict) -> None:
        """Fold one journal record in (records of other kinds are ignored)."""
        handler = _HANDLERS.get(record.get("type"))
        if handler:
            handler(self, record)


def _on_tool_request(history: ChangeHistory, record: dict) -> None:
    history._requests[record["call_id"]] = (record.get("name"), record.get("input"))


def _on_tool_start(history: ChangeHistory, record: dict) -> None:
    name, arguments = history._requests.get(record.get("call_id"), (None, None))
    if history.baseline is not None and is_tracked(name, arguments):
        history.open_calls[record["call_id"]] = name


def _on_baseline(history: ChangeHistory, record: dict) -> None:
    if history.baseline is None:
        history.baseline = record
    history.reference = history.anchor = record["snapshot"]
    history.since_anchor = []


def _on_tree_changes(history: ChangeHistory, record: dict) -> None:
    changes = [Change.from_record(item) for item in record.get("changes", [])]
    for change in changes:
        touch = Touch(record["by"], change.before, change.after, bool(record.get("interrupted")))
        history.touches.setdefault(change.path, []).append(touch)
    history.reference = record["to"]
    history.since_anchor.append(changes)
    if record["by"] == "agent":
        history.open_calls.pop(record.get("call_id"), None)


def _on_gap(history: ChangeHistory, record: dict) -> None:
    history.gaps.append(record)
    history.reference = None
    history.open_calls.pop(record.get("call_id"), None)


_HANDLERS: dict[str, Callable[[ChangeHistory, dict], None]] = {
    "tool_request": _on_tool_request,
    "tool_start": _on_tool_start,
    "baseline": _on_baseline,
    "tree_changes": _on_tree_changes,
    "attribution_gap": _on_gap,
}


Part = tuple[Version | None, Version | None]


@dataclass
class FileChange:
    """The agent's net change to one file (or one renamed file)."""

    path: str
    parts: list[Part]
    """The agent's stretches of work: (before, after) each; more than one when someone else edited in between."""
    outside: bool = False
    """Someone else also changed the file during the session."""
    later: bool = False
    """Someone else changed it after the agent's last change."""
    interrupted: bool = False
    """Part of the change happened in a tool call the session did not finish."""
    old_path: str | None = None
    """For a rename: where the file was."""

    @property
    def origin(self) -> Version | None:
        return self.parts[0][0]

    @property
    def result(self) -> Version | None:
        return self.parts[-1][1]

    @property
    def status(self) -> str:
        """A (created), D (deleted), R (renamed) or M (modified)."""
        if self.old_path is not None:
            return "R"
        return "A" if self.origin is None else "D" if self.result is None else "M"


def net_changes(history: ChangeHistory) -> list[FileChange]:
    """One entry per file the agent changed, by path; files it changed back are left out."""
    found = (_file_change(path, touches) for path, touches in history.touches.items())
    return sorted((change for change in found if change), key=lambda change: change.path)


def _file_change(path: str, touches: list[Touch]) -> FileChange | None:
    """The agent's parts of one path's history: its consecutive touches join; anyone else's touch ends a part."""
    parts: list[list] = []
    outside = later = interrupted = False
    joined = False
    for touch in touches:
        if touch.by != "agent":
            outside = later = True
            joined = False
        elif joined:
            parts[-1][1] = touch.after
        else:
            parts.append([touch.before, touch.after])
            joined, later = True, False
        interrupted |= touch.interrupted
    kept = [(before, after) for before, after in parts if before != after]
    if not kept:
        return None
    return FileChange(path, kept, outside, later, interrupted)


def pair_renames(changes: list[FileChange], similarity: Callable[[Version, Version], float]) -> list[FileChange]:
    """Join a deleted and a created file into one rename when the content is the same or similar enough."""
    deleted = [c for c in changes if c.status == "D" and len(c.parts) == 1]
    created = [c for c in changes if c.status == "A" and len(c.parts) == 1]
    compare = similarity if len(deleted) * len(created) <= MAX_RENAME_PAIRS else lambda old, new: 0.0
    used: set[int] = set()
    for new in created:
        scored = [(1.0 if old.origin.oid == new.result.oid else compare(old.origin, new.result), i)
                  for i, old in enumerate(deleted) if i not in used]
        best = max(scored, default=(0.0, -1))
        if best[0] >= RENAME_SIMILARITY:
            used.add(best[1])
            _merge(deleted[best[1]], new)
    gone = {id(deleted[i]) for i in used}
    return [c for c in changes if id(c) not in gone]


def _merge(old: FileChange, new: FileChange) -> None:
    new.old_path = old.path
    new.parts = [(old.origin, new.result)]
    new.outside |= old.outside
    new.later |= old.later
    new.interrupted |= old.interrupted
