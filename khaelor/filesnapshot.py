"""Snapshots of a directory without git: content hashes, a stat cache and kept pre-images (SPEC §9).

The fallback used when the workspace is not in a git work tree or git is not
installed; it gives the same attribution, file for file. A snapshot is a
manifest — each file's path (relative, '/'-separated) mapped to a Version:
mode `100644`, `100755` or `120000` (symlink) and the SHA-256 of its bytes
(of the link target for a symlink; `stat:SIZE:MTIME` for a file over
`HASH_LIMIT` or one that cannot be read). Version-control folders, KHAELOR's
own data folder and symlinked directories are not entered; at most
`MAX_FILES` files are tracked.

Owns the `files` part of the session's snapshot folder (0700, files 0600):

    objects/<aa>/<rest>   the bytes of every version seen, by SHA-256 — the
                          pre-images `/diff` shows (each at most KEEP_LIMIT,
                          KEEP_BUDGET in all per run)
    manifests/<id>.json   the manifest of each baseline, so a resumed session
                          can rebuild its latest snapshot from the journal
    statcache.json        size, mtime, inode and hash per path: an unchanged
                          file is not read again. Entries younger than
                          RACY_NS are not trusted, since a same-size rewrite
                          within the timestamp granularity keeps the mtime.
"""

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from khaelor.changes import Blob, Change, SnapshotError, Version

HASH_LIMIT = 64 << 20
KEEP_LIMIT = 4 << 20
KEEP_BUDGET = 512 << 20
MAX_FILES = 100_000
RACY_NS = 2_000_000_000
SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".jj", ".bzr"})


class FileSnapshots:
    """Snapshots of one directory tree as manifests."""

    kind = "files"

    def __init__(self, root: Path, folder: Path, exclude: list[Path], reason: str = ""):
        self.root = Path(os.path.realpath(root))
        self.folder = folder
        self.reason = reason
        self.truncated = False
        self._exclude = {os.path.realpath(p) for p in exclude}
        self._manifests: dict[str, dict[str, Version]] = {}
        self._cache: dict[str, list] | None = None
        self._kept = 0

    # --- snapshots --------------------------------------------------------------

    def snapshot(self) -> str:
        """Walk the tree, hashing only files whose stat changed; returns the manifest id."""
        cache = self._load_cache()
        fresh: dict[str, list] = {}
        manifest: dict[str, Version] = {}
        young = time.time_ns() - RACY_NS
        for path, st in self._walk():
            entry = cache.get(path)
            if entry is None or entry[:4] != _signature(st):
                entry = [*_signature(st), self._hash(path, st)]
            if st.st_mtime_ns < young:
                fresh[path] = entry
            manifest[path] = Version(entry[3], entry[4])
        if fresh != cache:
            self._save_cache(fresh)
        return self._remember(manifest)

    def _walk(self):
        """(relative path, stat) of every regular file and symlink, in a stable order, at most MAX_FILES."""
        count, pending = 0, [""]
        self.truncated = False
        while pending:
            folder = pending.pop()
            for entry in _entries(self.root / folder):
                path = f"{folder}/{entry.name}" if folder else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS and entry.path not in self._exclude:
                        pending.append(path)
                    continue
                st = _lstat(entry)
                if st is None or not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                    continue
                if count == MAX_FILES:
                    self.truncated = True
                    return
                count += 1
                yield path, st

    def _hash(self, path: str, st: os.stat_result) -> str:
        data = _content(self.root / path, st)
        return self._keep(data) if data is not None else _stat_id(st)

    def _keep(self, data: bytes) -> str:
        """The SHA-256 of `data`, storing the bytes as an object when within the limits."""
        oid = hashlib.sha256(data).hexdigest()
        target = self._object(oid)
        if len(data) <= KEEP_LIMIT and self._kept + len(data) <= KEEP_BUDGET and not target.exists():
            _write_private(target, data)
            self._kept += len(data)
        return oid

    def _remember(self, manifest: dict[str, Version]) -> str:
        snapshot = manifest_id(manifest)
        self._manifests[snapshot] = manifest
        for old in list(self._manifests)[:-3]:
            del self._manifests[old]
        return snapshot

    def diff(self, old: str, new: str) -> list[Change]:
        """The paths whose version differs between two snapshots of this process."""
        try:
            before, after = self._manifests[old], self._manifests[new]
        except KeyError:
            raise SnapshotError("the previous snapshot of this tree is no longer known") from None
        paths = sorted(set(before) | set(after))
        return [Change(p, before.get(p), after.get(p)) for p in paths if before.get(p) != after.get(p)]

    # --- persistence ------------------------------------------------------------

    def facts(self, snapshot: str) -> dict:
        """What the baseline record says about the tree."""
        return {"files": len(self._manifests[snapshot]), "truncated": self.truncated, "reason": self.reason}

    def keep(self, snapshot: str) -> None:
        """Store a manifest so that a resumed session can start from it."""
        data = {path: [v.mode, v.oid] for path, v in self._manifests[snapshot].items()}
        _write_private(self.folder / "manifests" / f"{snapshot}.json", json.dumps(data).encode())

    def restore(self, history) -> bool:
        """Rebuild the history's reference manifest from its anchor plus the journaled changes."""
        try:
            raw = json.loads((self.folder / "manifests" / f"{history.anchor}.json").read_bytes())
        except (OSError, ValueError):
            return False
        manifest = {path: Version(mode, oid) for path, (mode, oid) in raw.items()}
        for changes in history.since_anchor:
            for change in changes:
                manifest.pop(change.path, None)
                if change.after is not None:
                    manifest[change.path] = change.after
        return self._remember(manifest) == history.reference

    def _load_cache(self) -> dict[str, list]:
        if self._cache is None:
            try:
                self._cache = json.loads((self.folder / "statcache.json").read_bytes())
            except (OSError, ValueError):
                self._cache = {}
        return self._cache

    def _save_cache(self, cache: dict[str, list]) -> None:
        self._cache = cache
        _write_private(self.folder / "statcache.json", json.dumps(cache).encode(), replace=True)

    # --- reading ----------------------------------------------------------------

    def current(self, paths: list[str]) -> dict[str, str | None]:
        """The content id each path has now (None: no file there); stores nothing."""
        result: dict[str, str | None] = {}
        for path in paths:
            st = _lstat_path(self.root / path)
            if st is None or not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                result[path] = None
                continue
            data = _content(self.root / path, st)
            result[path] = hashlib.sha256(data).hexdigest() if data is not None else _stat_id(st)
        return result

    def blobs(self, oids: list[str], limit: int) -> dict[str, Blob]:
        """Kept contents by id; size only for those over `limit`, nothing for those not kept."""
        return {oid: self._blob(oid, limit) for oid in oids}

    def _blob(self, oid: str, limit: int) -> Blob:
        if oid.startswith("stat:"):
            return Blob(None, int(oid.split(":")[1]))
        target = self._object(oid)
        try:
            size = target.stat().st_size
            return Blob(target.read_bytes() if size <= limit else None, size)
        except OSError:
            return Blob(None, None)

    def _object(self, oid: str) -> Path:
        return self.folder / "objects" / oid[:2] / oid[2:]


def manifest_id(manifest: dict[str, Version]) -> str:
    """A content id for a whole manifest."""
    digest = hashlib.sha256()
    for path in sorted(manifest):
        version = manifest[path]
        digest.update(f"{version.mode} {version.oid} {path}\0".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _signature(st: os.stat_result) -> list:
    return [st.st_size, st.st_mtime_ns, st.st_ino, _mode(st)]


def _mode(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "120000"
    return "100755" if st.st_mode & 0o100 else "100644"


def _content(path: Path, st: os.stat_result) -> bytes | None:
    """The bytes a version is identified by (the target of a symlink); None when too large or unreadable."""
    try:
        if stat.S_ISLNK(st.st_mode):
            return os.readlink(os.fsencode(path))
        if st.st_size <= HASH_LIMIT:
            return path.read_bytes()
    except OSError:
        pass
    return None


def _stat_id(st: os.stat_result) -> str:
    return f"stat:{st.st_size}:{st.st_mtime_ns}"


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as found:
            return sorted(found, key=lambda entry: entry.name)
    except OSError:
        return []


def _lstat(entry: os.DirEntry) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:
        return None


def _lstat_path(path: Path) -> os.stat_result | None:
    try:
        return path.lstat()
    except OSError:
        return None


def _write_private(path: Path, data: bytes, replace: bool = False) -> None:
    """Write `path` (0600, in 0700 folders) atomically; an existing file is kept unless `replace`."""
    if path.exists() and not replace:
        return
    _private_folder(path.parent)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(staging, path)


def _private_folder(folder: Path) -> None:
    """Create `folder` and any missing parents, each 0700."""
    if not folder.is_dir():
        _private_folder(folder.parent)
        folder.mkdir(mode=0o700, exist_ok=True)
