"""The session log: an append-only JSONL file that *is* the session (SPEC §10).

Owns the byte-level format and its two invariants:

* Writing: every record is one complete line, written with a single
  `write()` on an `O_APPEND` descriptor, then fsynced, while this process
  holds the session's exclusive lock. A log is born complete: its header is
  written to a private temporary file and linked into place, so no reader
  ever sees a log without a header.
* Reading: strict UTF-8 and JSON, bounded per record and per file. Only a
  final line without its newline is a torn append; it is ignored, and removed
  (after an owner-private backup) before the next append. A damaged complete
  line is an error naming its line number; nothing is ever rewritten.
"""

import datetime
import fcntl
import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from khaelor.errors import JournalError, SessionInUse

FORMAT = "khaelor-session"
VERSION = 1
MAX_RECORD_BYTES = 16 << 20
MAX_FILE_BYTES = 4 << 30
MAX_RECORDS = 5_000_000


def timestamp(clock: Callable[[], float]) -> str:
    """UTC ISO-8601 time with milliseconds, as records carry it."""
    moment = datetime.datetime.fromtimestamp(clock(), datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode_record(record: dict) -> bytes:
    """One record as one line of UTF-8 JSON, newline included."""
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8; ASCII escapes keep the line valid.
        data = json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    if len(data) >= MAX_RECORD_BYTES:
        raise JournalError(f"a {record.get('type')} record of {len(data)} bytes exceeds the {MAX_RECORD_BYTES} byte limit")
    return data + b"\n"


def private_dir(path: Path) -> Path:
    """Create `path` and any missing parents owner-private; return it."""
    missing = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class LogContents:
    """What a strict read of a log found."""

    records: list[dict]
    torn_offset: int | None
    """Byte offset where an unterminated final line starts, if there is one."""
    size: int


def read_log(path: Path) -> LogContents:
    """Read every complete record of a log; raise JournalError naming the first bad line."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise JournalError(f"cannot read session log {path}: {exc.strerror}") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_FILE_BYTES:
            raise JournalError(f"session log {path} is {size} bytes, over the {MAX_FILE_BYTES} byte limit")
        records, torn = _read_records(handle, path)
    if not records or records[0].get("type") != "header":
        raise JournalError(f"session log {path} does not start with a header record")
    _check_header(records[0], path)
    return LogContents(records, torn, size)


def _read_records(handle, path: Path) -> tuple[list[dict], int | None]:
    records: list[dict] = []
    offset = 0
    for number in range(1, MAX_RECORDS + 2):
        line = handle.readline(MAX_RECORD_BYTES + 1)
        if not line:
            return records, None
        if not line.endswith(b"\n"):
            if len(line) > MAX_RECORD_BYTES:
                raise JournalError(f"{path} line {number}: record longer than {MAX_RECORD_BYTES} bytes")
            return records, offset
        if number > MAX_RECORDS:
            raise JournalError(f"{path}: more than {MAX_RECORDS} records")
        records.append(_parse_line(line, number, path))
        offset += len(line)
    raise JournalError(f"{path}: more than {MAX_RECORDS} records")


def _parse_line(line: bytes, number: int, path: Path) -> dict:
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JournalError(f"{path} line {number}: invalid UTF-8 at byte {exc.start}") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JournalError(f"{path} line {number}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise JournalError(f"{path} line {number}: not a record (an object with a 'type')")
    return record


def _check_header(header: dict, path: Path) -> None:
    if header.get("format") != FORMAT:
        raise JournalError(f"{path} is not a KHAELOR session log")
    version = header.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise JournalError(f"{path} was written by a newer KHAELOR (format version {version})")


def read_last_record(path: Path, window: int = 1 << 16) -> dict | None:
    """The last complete record of a log, read from its tail only; None when there is none or it is damaged."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            while True:
                start = max(0, size - window)
                handle.seek(start)
                tail = handle.read(size - start)
                lines = tail.split(b"\n")[:-1]
                if len(lines) > 1 or start == 0 or window >= MAX_RECORD_BYTES:
                    break
                window *= 4
    except OSError:
        return None
    if not lines or (start > 0 and len(lines) < 2):
        return None
    try:
        record = json.loads(lines[-1].decode("utf-8"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class Journal:
    """The writing end of one session log, holding its lock until closed."""

    def __init__(self, path: Path, fd: int, lock_fd: int, clock: Callable[[], float]):
        self.path = path
        self._fd = fd
        self._lock_fd = lock_fd
        self._clock = clock
        self._mutex = threading.Lock()
        self.listeners: list[Callable[[dict], None]] = []

    @classmethod
    def create(cls, path: Path, header: dict, clock: Callable[[], float]) -> "Journal":
        """Make a new log whose first line is `header`; fail if the path exists."""
        lock_fd = _lock(path)
        record = {"type": "header", "v": VERSION, "ts": timestamp(clock), "format": FORMAT, "version": VERSION, **header}
        staging = path.with_name(f".{path.name}.{os.getpid()}.new")
        try:
            _write_new(staging, encode_record(record))
            os.link(staging, path)
        except FileExistsError:
            _unlock(lock_fd)
            raise JournalError(f"session log {path} already exists") from None
        finally:
            staging.unlink(missing_ok=True)
        _fsync_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        return cls(path, fd, lock_fd, clock)

    @classmethod
    def open(cls, path: Path, clock: Callable[[], float]) -> tuple["Journal", LogContents]:
        """Lock an existing log for appending; returns it with its current contents."""
        lock_fd = _lock(path)
        try:
            contents = read_log(path)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except BaseException:
            _unlock(lock_fd)
            raise
        journal = cls(path, fd, lock_fd, clock)
        if contents.torn_offset is not None:
            journal._remove_torn_tail(contents)
        return journal, contents

    def append(self, kind: str, /, **fields) -> dict:
        """Write one record now (durably) and hand it to the listeners."""
        record = {"type": kind, "v": VERSION, "ts": timestamp(self._clock), **fields}
        data = encode_record(record)
        with self._mutex:
            if self._fd < 0:
                raise JournalError(f"session log {self.path} is closed")
            _write_all(self._fd, data)
            os.fsync(self._fd)
        for listener in self.listeners:
            listener(record)
        return record

    def close(self) -> None:
        """Release the descriptor and the lock (idempotent)."""
        with self._mutex:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
                _unlock(self._lock_fd)

    def _remove_torn_tail(self, contents: LogContents) -> None:
        offset = contents.torn_offset
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            fragment = handle.read(MAX_RECORD_BYTES)
        backup = private_dir(self.path.parent / ".repair") / f"{self.path.stem}.{offset}.torn"
        _write_new(backup, fragment, exclusive=False)
        os.truncate(self.path, offset)
        os.fsync(self._fd)
        self.append("torn_tail_removed", offset=offset, bytes=len(fragment), backup=str(backup))


def write_new_log(path: Path, records: list[dict]) -> None:
    """Write a whole new log at once: a private staging file, fsynced, then linked into place.

    The log appears complete or not at all; JournalError when `path` exists.
    """
    data = b"".join(encode_record(record) for record in records)
    staging = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        _write_new(staging, data)
        os.link(staging, path)
    except FileExistsError:
        raise JournalError(f"session log {path} already exists") from None
    finally:
        staging.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def _write_new(path: Path, data: bytes, exclusive: bool = True) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def lock_path(log_path: Path) -> Path:
    return log_path.parent / ".locks" / f"{log_path.stem}.lock"


def _lock(log_path: Path) -> int:
    """Take the session's exclusive lock, or raise SessionInUse naming the holder."""
    path = lock_path(log_path)
    private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise SessionInUse(f"session {log_path.stem} is in use by pid {holder}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


@contextmanager
def exclusive(log_path: Path):
    """Hold a session's lock without opening its log (for commands that move or repair it)."""
    fd = _lock(log_path)
    try:
        yield
    finally:
        _unlock(fd)


def _unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
