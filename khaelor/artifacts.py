"""Session artifacts: spilled tool output, process logs and change snapshots (SPEC §10).

A session may own three folders under the data root, each named by its id:
`tool-output/<id>/`, `process-logs/<id>/` and `snapshots/<id>/`. This module
measures them, removes one session's, finds orphans (folders of sessions
whose log is neither live nor in any trash), and keeps their total under
`tool_output.cap_total` by removing whole sessions' folders, least recently
written first.

Invariants:
* Only folders named like a session id are touched.
* A walk never follows a symlink (a link counts as itself and is unlinked,
  never entered) and visits at most MAX_ENTRIES entries.
* The kept session, and any session whose lock a running KHAELOR holds, is
  never removed by the cap.
* A folder that cannot be read or removed becomes a one-line problem in the
  report; nothing here raises for it.

"Oldest" is the newest mtime anywhere in a session's folders, not the time
in its id: a month-old session resumed today is in use again, and its
spilled output is what its transcript points at.
"""

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from khaelor.store import Store, is_session_id

KINDS = ("tool-output", "process-logs", "snapshots")
MAX_ENTRIES = 1_000_000
CHECK_EVERY = 24 * 3600
STAMP = ".artifacts-checked"


@dataclass
class Usage:
    """The artifact folders of one session, their size and their last write."""

    session_id: str
    size: int = 0
    newest: float = 0.0


@dataclass
class Survey:
    """Every session's artifacts under a data root, and what could not be read."""

    sessions: dict[str, Usage] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(usage.size for usage in self.sessions.values())


@dataclass
class Freed:
    """What a removal freed, and what it could not remove."""

    sessions: list[str] = field(default_factory=list)
    size: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, other: "Freed") -> None:
        self.sessions += [session_id for session_id in other.sessions if session_id not in self.sessions]
        self.size += other.size
        self.problems += other.problems


def size_text(size: int) -> str:
    """`5,000 bytes`, or `1,073,741,824 bytes (1.0 GiB)` from a mebibyte up."""
    exact = f"{size:,} bytes"
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if size >= 1 << shift:
            return f"{exact} ({size / (1 << shift):.1f} {unit})"
    return exact


def folders_of(data_root: Path, session_id: str) -> list[Path]:
    """Where the session's artifacts live (whether or not they exist)."""
    return [data_root / kind / session_id for kind in KINDS]


def survey(data_root: Path, limit: int = MAX_ENTRIES) -> Survey:
    """Measure every session's artifact folders under `data_root`."""
    found, walk = Survey(), _Walk(limit)
    for kind in KINDS:
        for entry in walk.scan(data_root / kind, missing_ok=True):
            if is_session_id(entry.name):
                usage = found.sessions.setdefault(entry.name, Usage(entry.name))
                size, newest = walk.measure(Path(entry.path))
                usage.size += size
                usage.newest = max(usage.newest, newest)
    found.problems = walk.problems
    return found


def remove_session(data_root: Path, session_id: str) -> Freed:
    """Remove the session's artifact folders; a symlinked folder is unlinked, never followed."""
    if not is_session_id(session_id):
        raise ValueError(f"not a session id: {session_id!r}")
    freed = Freed()
    for folder in folders_of(data_root, session_id):
        freed.add(_remove(folder))
    if freed.size or not freed.problems:
        freed.sessions.append(session_id)
    return freed


def orphans(found: Survey, known: set[str]) -> list[str]:
    """Ids with artifacts but no log, live or trashed, among `known`."""
    return sorted(session_id for session_id in found.sessions if session_id not in known)


def enforce_cap(data_root: Path, cap: int, keep: set[str], busy: Callable[[str], bool],
                found: Survey | None = None) -> tuple[Freed, int]:
    """Remove whole sessions' artifacts, least recently written first, until the total is at most `cap`.

    Returns what was freed and the total left. Sessions in `keep` and those
    `busy` says are in use are skipped.
    """
    found = found or survey(data_root)
    freed, total = Freed(problems=list(found.problems)), found.total
    for usage in sorted(found.sessions.values(), key=lambda usage: (usage.newest, usage.session_id)):
        if total <= cap:
            break
        if usage.session_id in keep or busy(usage.session_id):
            continue
        removed = remove_session(data_root, usage.session_id)
        freed.add(removed)
        total -= removed.size
    if total > cap:
        freed.problems.append(f"still {size_text(total)}, over the cap of {size_text(cap)}: "
                              "what is left belongs to sessions in use or could not be removed")
    return freed, total


def collect_garbage(store: Store, others: list[Store], cap: int) -> tuple[list[str], list[str]]:
    """`khaelor sessions gc`: remove orphans' artifacts, then enforce the cap.

    Returns lines saying what was freed, and the problems met.

    A session counts as known when its log is in `store` or any of `others`
    (live or trashed); its lock is probed in each of them.
    """
    stores = [store, *others]
    found = survey(store.data_root)
    known = set().union(*(each.known_ids() for each in stores))
    lost = Freed(problems=list(found.problems))
    for session_id in orphans(found, known):
        lost.add(remove_session(store.data_root, session_id))
        del found.sessions[session_id]
    capped, total = enforce_cap(store.data_root, cap, set(), lambda sid: any(each.in_use(sid) for each in stores),
                                Survey(found.sessions))
    return ([f"orphans: removed the artifacts of {len(lost.sessions)} session(s) with no log, live or trashed: "
             f"freed {size_text(lost.size)}",
             f"cap: removed the artifacts of {len(capped.sessions)} least recently used session(s): freed "
             f"{size_text(capped.size)}; {size_text(total)} left; tool_output.cap_total is {size_text(cap)}"],
            lost.problems + capped.problems)


def enforce_cap_at_start(store: Store, cap: int, current: str, now: float, notice: Callable[[str], None]) -> None:
    """At a session's start, at most once per CHECK_EVERY: enforce the cap, keeping `current`.

    Never raises: a failure, or anything removed, is one notice line.
    """
    try:
        if not _due(store.data_root, now):
            return
        freed, _ = enforce_cap(store.data_root, cap, {current}, store.in_use)
        _stamp(store.data_root, now)
    except Exception as exc:  # clean-up must never stop a session from starting
        notice(f"artifact clean-up skipped: {exc}")
        return
    removed = (f"removed the artifacts of {len(freed.sessions)} least recently used session(s) "
               f"({size_text(freed.size)}) to stay under tool_output.cap_total" if freed.sessions else "")
    more = f" (and {len(freed.problems) - 1} more problems)" if len(freed.problems) > 1 else ""
    problem = f"artifact clean-up: {freed.problems[0]}{more}" if freed.problems else ""
    if removed or problem:
        notice("; ".join(part for part in (removed, problem) if part))


class _Walk:
    """A bounded walk that never follows symlinks and collects what it could not read."""

    def __init__(self, limit: int):
        self.left = limit
        self.problems: list[str] = []
        self.stopped = False

    def scan(self, folder: Path, missing_ok: bool = False) -> list[os.DirEntry]:
        try:
            with os.scandir(folder) as entries:
                return list(entries)
        except FileNotFoundError:
            if not missing_ok:
                self.problems.append(f"{folder} vanished while being measured")
        except OSError as exc:
            self.problems.append(f"cannot read {folder}: {exc.strerror or exc}")
        return []

    def measure(self, top: Path) -> tuple[int, float]:
        """Bytes of regular files under `top` (itself included) and the newest mtime seen."""
        try:
            info = top.lstat()
        except OSError:
            return 0, 0.0
        size, newest, stack = _bytes(info), info.st_mtime, [top] if stat.S_ISDIR(info.st_mode) else []
        while stack:
            for entry in self.scan(stack.pop()):
                if self.left <= 0:
                    self._stop()
                    return size, newest
                self.left -= 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                size, newest = size + _bytes(info), max(newest, info.st_mtime)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(Path(entry.path))
        return size, newest

    def _stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.problems.append("stopped counting at the entry limit: sizes are lower bounds")


def _bytes(info: os.stat_result) -> int:
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def _remove(folder: Path) -> Freed:
    """Remove one artifact folder; what remains after a failure is measured and reported."""
    walk = _Walk(MAX_ENTRIES)
    before, _ = walk.measure(folder)
    failures: list[str] = []

    def failed(_function, path: str, exc_info) -> None:
        if not isinstance(exc_info[1], FileNotFoundError):  # another process removed it first: fine
            failures.append(f"{path}: {exc_info[1].strerror or exc_info[1]}")

    try:
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder, onerror=failed)
    except FileNotFoundError:
        pass
    except OSError as exc:
        failures.append(f"{folder}: {exc.strerror or exc}")
    if not failures:
        return Freed(size=before)
    left, _ = _Walk(MAX_ENTRIES).measure(folder)
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return Freed(size=before - left, problems=[f"could not remove {failures[0]}{more}"])


def _due(data_root: Path, now: float) -> bool:
    """Whether the last check is older than CHECK_EVERY (or unknown, or in the future)."""
    if not any((data_root / kind).is_dir() for kind in KINDS):
        return False
    try:
        last = float((data_root / STAMP).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return True
    return not 0 <= now - last < CHECK_EVERY


def _stamp(data_root: Path, now: float) -> None:
    fd = os.open(data_root / STAMP, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(f"{now}\n")
