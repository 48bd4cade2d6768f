"""`/diff` and `khaelor sessions diff`: the agent's net change per file, as lines to print (SPEC §9).

Owns the presentation. A heading (files, lines added and removed, the
baseline), one summary line per file (status, path, counts) with a note for
each file someone else also changed, then — unless `--stat` — a unified
diff per file. Binary files, files over DIFF_LIMIT, submodules and contents
that were not kept are summarized in one line. A path with control
characters or quotes is shown quoted.

The result is a list of (text, style) pairs; front ends print them through
`Output`, which colours them only on a terminal without NO_COLOR. A git work
tree and the file-state fallback give the same lines, apart from the
heading's description of the baseline.
"""

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from khaelor.attribution import Backend, open_reader, tracker_of
from khaelor.changes import (RENAME_SIMILARITY, Blob, ChangeHistory, FileChange, SnapshotError, Version, net_changes,
                             pair_renames)
from khaelor.filesnapshot import MAX_FILES
from khaelor.gitbase import HUGE_FILE
from khaelor.output import Output, wants_color

DIFF_LIMIT = 1 << 20
RENAME_LIMIT = 256 << 10
BINARY_PROBE = 8000
CONTEXT = 3
GITLINK = "160000"
STAT_FLAG = "--stat"

Line = tuple[str, str | None]


def parse_args(arg: str) -> tuple[str | None, bool]:
    """`[PATH] [--stat]` in either order; PATH may contain spaces and may be quoted."""
    words, stat = arg.strip(), False
    if words == STAT_FLAG or words.startswith(STAT_FLAG + " "):
        words, stat = words[len(STAT_FLAG):].strip(), True
    elif words.endswith(" " + STAT_FLAG):
        words, stat = words[:-len(STAT_FLAG)].strip(), True
    if len(words) >= 2 and words[0] == words[-1] and words[0] in "'\"":
        words = words[1:-1]
    return words or None, stat


@dataclass
class Part:
    """One (before, after) stretch of the agent's work on a file, rendered."""

    body: list[Line] = field(default_factory=list)
    added: int = 0
    removed: int = 0
    summary: str | None = None
    """Set instead of a line diff: binary, too large, not kept, submodule."""


def report(history: ChangeHistory, reader: Backend | None, where: Path, path: str | None = None,
           stat: bool = False) -> list[Line]:
    """What the agent changed, as lines: the summary, then (unless `stat`) the diffs.

    `reader` gives contents and current versions (None: journal facts only);
    `path` is relative to `where`.
    """
    if history.baseline is None:
        return [("no change record in this session: tracking never started "
                 f"({_gap_reasons(history) or 'the session began before change tracking'})", "dim")]
    notes: list[Line] = []
    changes = net_changes(history)
    blobs = _load(reader, changes, notes)
    changes = pair_renames(changes, lambda a, b: _similarity(blobs.get(a.oid), blobs.get(b.oid)))
    prefix = _prefix(where, Path(history.baseline["root"]), path)
    changes = [c for c in changes if _selected(c, prefix)]
    _mark_later(reader, changes, notes)
    parts = {id(c): [_part(before, after, blobs) for before, after in c.parts] for c in changes}
    lines = [_heading(history, changes, parts, path)]
    for change in changes:
        lines += _summary(change, parts[id(change)])
    lines += notes + _footer(history)
    if not stat:
        for change in changes:
            lines += _body(change, parts[id(change)])
    return lines


def _load(reader: Backend | None, changes: list[FileChange], notes: list[Line]) -> dict[str, Blob]:
    oids = sorted({v.oid for c in changes for part in c.parts for v in part if v and v.mode != GITLINK})
    try:
        return reader.blobs(oids, DIFF_LIMIT) if reader else {}
    except (SnapshotError, OSError) as exc:
        notes.append((f"note: file contents are unavailable ({exc})", "yellow"))
        return {}


def _mark_later(reader: Backend | None, changes: list[FileChange], notes: list[Line]) -> None:
    """Flag files whose content now differs from what the agent left."""
    try:
        now = reader.current([c.path for c in changes]) if reader and changes else {}
    except (SnapshotError, OSError) as exc:
        notes.append((f"note: the current files could not be compared ({exc})", "yellow"))
        return
    for change in changes:
        if change.path in now:
            change.later |= now[change.path] != (change.result.oid if change.result else None)


def _prefix(where: Path, root: Path, path: str | None) -> str | None:
    """`path` (relative to `where`) relative to the tracked root, '' for all of it."""
    if path is None:
        return None
    relative = os.path.relpath(os.path.normpath(where / path), root)
    return "" if relative == "." else relative


def _selected(change: FileChange, prefix: str | None) -> bool:
    if not prefix:
        return True
    return any(p == prefix or p.startswith(prefix.rstrip("/") + "/") for p in (change.path, change.old_path) if p)


def _heading(history: ChangeHistory, changes: list[FileChange], parts: dict, path: str | None) -> Line:
    where = f" under {shown(path)}" if path else ""
    base = f"baseline: {describe_baseline(history.baseline)}"
    if not changes:
        return f"the agent has not changed any files{where} in this session · {base}", "bold"
    added, removed = _counts([p for c in changes for p in parts[id(c)]])
    count = f"{len(changes)} file{'s' if len(changes) != 1 else ''}"
    return f"{count} changed by the agent{where} since the session began (+{added} -{removed}) · {base}", "bold"


def describe_baseline(baseline: dict) -> str:
    """Where the session began, in a few words."""
    if baseline["backend"] != "git":
        return f"no git ({baseline.get('reason') or 'not a repository'}); tracked by content"
    head, branch = baseline.get("head"), baseline.get("branch")
    if head is None:
        return f"git, no commits yet on {branch or 'an unborn branch'}"
    return f"git {head[:12]} on {branch}" if branch else f"git {head[:12]} (detached HEAD)"


def _summary(change: FileChange, parts: list[Part]) -> list[Line]:
    name = f"{shown(change.old_path)} → {shown(change.path)}" if change.old_path else shown(change.path)
    words = [p.summary.split(",")[0] for p in parts if p.summary]
    counts = words[0] if words else "+{} -{}".format(*_counts(parts))
    lines: list[Line] = [(f"  {change.status}  {name}  {counts}", None)]
    if change.interrupted:
        lines.append(("     ! changed during a tool call the session did not finish; may include others' edits "
                      "made before it resumed", "yellow"))
    if change.outside and len(change.parts) > 1:
        lines.append(("     ! someone else edited it between the agent's changes; only the agent's parts are shown",
                      "yellow"))
    elif change.outside and not change.later:
        lines.append(("     ! also edited by someone else during the session; only the agent's change is shown",
                      "yellow"))
    if change.later:
        lines.append(("     ! changed since the agent's last edit; the file now differs from what is shown", "yellow"))
    return lines


def _counts(parts: list[Part]) -> tuple[int, int]:
    return sum(p.added for p in parts), sum(p.removed for p in parts)


def _footer(history: ChangeHistory) -> list[Line]:
    lines: list[Line] = []
    skipped = history.baseline.get("skipped") or []
    if skipped:
        more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        listed = ", ".join(shown(p) for p in skipped[:5]) + more
        lines.append((f"note: untracked files over {HUGE_FILE >> 20} MiB are not tracked: {listed}", "dim"))
    if history.baseline.get("truncated"):
        lines.append((f"note: the directory has too many files; only the first {MAX_FILES:,} are tracked", "dim"))
    calls = {g["call_id"] for g in history.gaps if g.get("call_id")}
    if calls:
        lines.append((f"note: changes around {len(calls)} tool call(s) could not be tracked: {_gap_reasons(history)}",
                      "yellow"))
    return lines


def _gap_reasons(history: ChangeHistory) -> str:
    return "; ".join(dict.fromkeys(g.get("reason", "") for g in history.gaps))


def _body(change: FileChange, parts: list[Part]) -> list[Line]:
    old, new = change.old_path or change.path, change.path
    lines: list[Line] = [("", None), (f"diff a/{shown(old)} b/{shown(new)}", "bold")]
    lines += _mode_lines(change.origin, change.result)
    for number, ((before, after), part) in enumerate(zip(change.parts, parts), 1):
        if len(parts) > 1:
            lines.append((f"(part {number} of {len(parts)}; someone else edited the file between the parts)", "dim"))
        if part.summary:
            lines.append((part.summary, "dim"))
            continue
        lines.append((f"--- {'a/' + shown(old) if before else '/dev/null'}", "bold"))
        lines.append((f"+++ {'b/' + shown(new) if after else '/dev/null'}", "bold"))
        lines += part.body
    return lines


def _mode_lines(origin: Version | None, result: Version | None) -> list[Line]:
    if origin is None:
        return [(f"new file mode {result.mode}", "bold")]
    if result is None:
        return [(f"deleted file mode {origin.mode}", "bold")]
    if origin.mode != result.mode:
        return [(f"old mode {origin.mode}", "bold"), (f"new mode {result.mode}", "bold")]
    return []


def _part(before: Version | None, after: Version | None, blobs: dict[str, Blob]) -> Part:
    if GITLINK in (before and before.mode, after and after.mode):
        return Part(summary=f"submodule {_short(before)} → {_short(after)}")
    old, new = _side(before, blobs), _side(after, blobs)
    if old.data is None or new.data is None:
        if any(b.data is None and (b.size or 0) > DIFF_LIMIT for b in (old, new)):
            return Part(summary=f"large file, {_sizes(old, new)}; not shown (over {DIFF_LIMIT >> 20} MiB)")
        return Part(summary="contents not available")
    if _binary(old.data) or _binary(new.data):
        return Part(summary=f"binary file, {_sizes(old, new)}")
    return _text_part(_lines(old.data), _lines(new.data))


def _side(version: Version | None, blobs: dict[str, Blob]) -> Blob:
    if version is None:
        return Blob(b"", 0)
    return blobs.get(version.oid) or Blob(None, None)


def _sizes(old: Blob, new: Blob) -> str:
    def size(blob: Blob) -> str:
        return "?" if blob.size is None else f"{blob.size:,}"

    return f"{size(old)} → {size(new)} bytes"


def _short(version: Version | None) -> str:
    return version.oid[:12] if version else "none"


def _binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_PROBE]


def _lines(data: bytes) -> list[str]:
    """Lines with their newline, the last one without when the file does not end with one."""
    pieces = data.decode("utf-8", "replace").split("\n")
    return [p + "\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def _text_part(old: list[str], new: list[str]) -> Part:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    part = Part()
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        part.removed += (i2 - i1) if tag in ("replace", "delete") else 0
        part.added += (j2 - j1) if tag in ("replace", "insert") else 0
    for group in matcher.get_grouped_opcodes(CONTEXT):
        first, last = group[0], group[-1]
        part.body.append((f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@", "cyan"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                part.body += _marked(" ", old[i1:i2], None)
                continue
            part.body += _marked("-", old[i1:i2], "red") + _marked("+", new[j1:j2], "green")
    return part


def _marked(sign: str, lines: list[str], style: str | None) -> list[Line]:
    out: list[Line] = []
    for line in lines:
        out.append((sign + line.removesuffix("\n"), style))
        if not line.endswith("\n"):
            out.append(("\\ No newline at end of file", "dim"))
    return out


def _range(start: int, stop: int) -> str:
    """A unified-diff range: 'start,length', 1-based (as difflib writes it)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _similarity(old: Blob | None, new: Blob | None) -> float:
    """How alike two contents are (0…1); 0 when either is missing, binary or large."""
    if not old or not new or old.data is None or new.data is None:
        return 0.0
    if max(len(old.data), len(new.data)) > RENAME_LIMIT or _binary(old.data) or _binary(new.data):
        return 0.0
    matcher = difflib.SequenceMatcher(None, _lines(old.data), _lines(new.data))
    bound = matcher.quick_ratio()  # an upper bound, cheap: below the bar it is answer enough
    return bound if bound < RENAME_SIMILARITY else matcher.ratio()


def shown(path: str) -> str:
    """A path for display: as is, or JSON-quoted when it holds control characters, quotes or backslashes."""
    if any(ord(ch) < 0x20 or ch in '"\\\x7f' for ch in path):
        return json.dumps(path, ensure_ascii=False)
    return path


def session_lines(runtime, arg: str) -> list[Line]:
    """`/diff [PATH] [--stat]` for the REPL's current session."""
    path, stat = parse_args(arg)
    tracker = tracker_of(runtime.agent.watchers) if runtime else None
    if tracker is None:
        return [("no session yet: the agent has not changed anything", "dim")]
    return report(tracker.history, tracker.backend, runtime.session.workspace, path, stat)


def print_session_diff(log: Path, store, env, path: str | None, stat: bool) -> int:
    """`khaelor sessions diff ID [PATH] [--stat]`: print what the agent changed in a stored session."""
    history, reader = open_reader(log, store, env.environ)
    out = Output(env.stdout, env.stderr, wants_color(env.stdout, env.environ))
    for text, style in report(history, reader, Path(env.cwd), path, stat):
        out.message(text, style)
    return 0
