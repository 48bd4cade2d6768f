"""What the agent knows about the files it touched (SPEC §6).

Each read records path, size, mtime and content hash; each modification
records the hashes before and after. `write`/`edit` of an existing file are
allowed only when the agent read it in this session and it has not changed on
disk since (stat first, then hash). The state is rebuilt on resume from the
journal's `file_read` and `file_modified` records, so the protection survives
restarts.
"""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

HASH_CHUNK = 1 << 20


class StaleFile(Exception):
    """The file was never read in this session, or changed on disk since."""


@dataclass(frozen=True)
class FileVersion:
    """One observed version of a file."""

    path: str
    size: int
    mtime_ns: int
    sha256: str

    def as_record(self) -> dict:
        return {"path": self.path, "size": self.size, "mtime_ns": self.mtime_ns, "sha256": self.sha256}


def hash_file(path: Path) -> str:
    """SHA-256 of a file's bytes, read in bounded chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def observe(path: Path, data: bytes | None = None) -> FileVersion:
    """The current version of `path`; `data` spares a second read when the caller has the bytes."""
    st = os.stat(path)
    sha = hashlib.sha256(data).hexdigest() if data is not None else hash_file(path)
    return FileVersion(str(path), st.st_size, st.st_mtime_ns, sha)


class FileState:
    """Known versions of files, keyed by absolute path."""

    def __init__(self) -> None:
        self.known: dict[str, FileVersion] = {}

    def note(self, version: FileVersion) -> None:
        """Remember `version` as the agent's latest knowledge of its file."""
        self.known[version.path] = version

    def forget(self, path: Path) -> None:
        self.known.pop(str(path), None)

    def require_current(self, path: Path) -> FileVersion:
        """Raise StaleFile unless `path` is exactly the version last read or written."""
        known = self.known.get(str(path))
        if known is None:
            raise StaleFile(f"{path} has not been read in this session — read it first")
        st = os.stat(path)
        if st.st_size == known.size and st.st_mtime_ns == known.mtime_ns:
            return known
        if st.st_size == known.size and hash_file(path) == known.sha256:
            return known
        raise StaleFile(f"{path} changed since last read — read it again")

    def apply(self, record: dict) -> None:
        """Replay one journal record (`file_read` or `file_modified`)."""
        kind = record.get("type")
        if kind not in ("file_read", "file_modified"):
            return
        if kind == "file_modified" and record.get("sha256") is None:
            self.forget(Path(record["path"]))
            return
        self.note(FileVersion(record["path"], record["size"], record["mtime_ns"], record["sha256"]))
