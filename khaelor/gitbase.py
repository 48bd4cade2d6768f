"""Git plumbing for the session baseline and the per-call snapshots (SPEC §9).

Owns every git command KHAELOR runs, and one invariant: the person's index,
HEAD, refs, stash, config and working tree are only ever read. A snapshot of
the work tree — tracked, modified and untracked non-ignored files — is built
in a private index file (`GIT_INDEX_FILE`) with `git add -A` and written as a
tree with `git write-tree`: both add objects to the repository's object store
and change nothing else.

The private index lives in the session's snapshot folder and starts as a
byte copy of the person's index, so its stat cache is warm from the first
snapshot; after that `git add` re-reads only files whose stat changed, and a
quiet 10,000-file tree costs one lstat per file. Untracked files over
`HUGE_FILE` found at the baseline are left out of every snapshot, and so is
KHAELOR's own data folder when it lies inside the tree.

Every git process runs in a session of its own with optional locks off and a
timeout; failures become `GitError` with one line of git's message.
"""

import os
import shutil
import subprocess
from pathlib import Path

from khaelor.changes import ABSENT_MODE, Blob, Change, SnapshotError, Version

GIT_TIMEOUT = 300.0
HUGE_FILE = 64 << 20
ARG_BATCH = 200
# No fsmonitor daemon, a private index in one plain file, no refusal over line-ending
# warnings, no housekeeping in the person's repository, no advice on stderr.
CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.splitIndex=false", "-c", "core.safecrlf=false",
          "-c", "gc.auto=0", "-c", "maintenance.auto=false",
          "-c", "advice.addEmbeddedRepo=false", "-c", "advice.addIgnoredFile=false")


class GitError(SnapshotError):
    """A git command failed."""


class NoRepository(Exception):
    """No usable git work tree: git is missing, or the directory is not in a work tree."""


class Repo:
    """A git work tree, driven through the git command line."""

    def __init__(self, root: Path, environ: dict[str, str], executable: str = "git"):
        self.root = root
        self.environ = environ
        self.executable = executable

    @classmethod
    def find(cls, workspace: Path, environ: dict[str, str]) -> "Repo":
        """The work tree containing `workspace`; NoRepository (with the reason) when there is none."""
        executable = shutil.which("git", path=environ.get("PATH", os.defpath))
        if executable is None:
            raise NoRepository("git is not installed (not found on PATH)")
        try:
            top = Repo(workspace, environ, executable).git("rev-parse", "--show-toplevel").stdout
        except GitError as exc:
            raise NoRepository(f"not a git work tree ({exc})") from None
        return cls(Path(os.fsdecode(top.rstrip(b"\n"))), environ, executable)

    def git(self, *args: str, index: Path | None = None, stdin: bytes | None = None,
            ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        """Run one git command in the work tree; GitError unless its exit status is in `ok`."""
        env = {**self.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        try:
            done = subprocess.run([self.executable, *CONFIG, *args], cwd=self.root, env=env, input=stdin,
                                  capture_output=True, timeout=GIT_TIMEOUT, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} took longer than {GIT_TIMEOUT:g} s") from None
        except OSError as exc:
            raise GitError(f"cannot run git in {self.root}: {exc.strerror}") from None
        if done.returncode not in ok:
            raise GitError(f"git {args[0]} failed: {_first_line(done.stderr) or f'exit status {done.returncode}'}")
        return done

    def head(self) -> str | None:
        """The commit HEAD points at; None in a repository without commits."""
        done = self.git("rev-parse", "-q", "--verify", "HEAD^{commit}", ok=(0, 1))
        return done.stdout.decode().strip() or None

    def branch(self) -> str | None:
        """The checked-out branch; None on a detached HEAD."""
        done = self.git("symbolic-ref", "-q", "--short", "HEAD", ok=(0, 1))
        return os.fsdecode(done.stdout.strip()) or None

    def index_file(self) -> Path:
        """The person's index file (honouring GIT_INDEX_FILE and worktrees)."""
        path = Path(os.fsdecode(self.git("rev-parse", "--git-path", "index").stdout.rstrip(b"\n")))
        return path if path.is_absolute() else self.root / path

    def tree_changes(self, old: str, new: str) -> list[Change]:
        """The paths whose mode or content differ between two trees."""
        if old == new:
            return []
        out = self.git("diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", old, new).stdout
        return parse_raw_diff(out)

    def current(self, paths: list[str]) -> dict[str, str | None]:
        """The blob id each path would have if added now (None: no file there); writes nothing."""
        result: dict[str, str | None] = {path: None for path in paths}
        files = [p for p in paths if (self.root / p).is_file() and not (self.root / p).is_symlink()]
        for start in range(0, len(files), ARG_BATCH):
            chunk = files[start:start + ARG_BATCH]
            ids = self.git("hash-object", "--", *chunk).stdout.decode().split()
            result.update(zip(chunk, ids))
        for path in (p for p in paths if (self.root / p).is_symlink()):
            target = os.readlink(os.fsencode(self.root / path))
            result[path] = self.git("hash-object", "--stdin", "--no-filters", stdin=target).stdout.decode().strip()
        return result

    def blobs(self, oids: list[str], limit: int) -> dict[str, Blob]:
        """Content of each blob up to `limit` bytes (larger ones: size only)."""
        if not oids:
            return {}
        listing = self.git("cat-file", "--batch-check", stdin=_lines(oids)).stdout.decode().splitlines()
        sizes = {fields[0]: int(fields[2]) for fields in map(str.split, listing) if len(fields) == 3}
        small = [oid for oid, size in sizes.items() if size <= limit]
        contents = _parse_batch(self.git("cat-file", "--batch", stdin=_lines(small)).stdout) if small else {}
        return {oid: Blob(contents.get(oid), sizes.get(oid)) for oid in oids}


class GitSnapshots:
    """Snapshots of one work tree as tree objects, made through a private index."""

    kind = "git"

    def __init__(self, repo: Repo, folder: Path, exclude: list[Path], skipped: list[str] | None = None):
        self.repo = repo
        self.root = repo.root
        self.index = folder / "index"
        self.skipped = skipped
        self._excludes = [_exclude(p) for p in self._inside(exclude)]

    def snapshot(self) -> str:
        """The id of a tree holding the work tree as it is now."""
        try:
            return self._snapshot()
        except GitError:
            self.index.unlink(missing_ok=True)  # a damaged private index is only a cache: start it again
            return self._snapshot()

    def _snapshot(self) -> str:
        self._prepare()
        add = ["add", "-A", "--ignore-errors", "--", ".", *self._excludes, *map(_exclude, self.skipped)]
        self.repo.git(*add, index=self.index, ok=(0, 1))
        tree = self.repo.git("write-tree", index=self.index).stdout.decode().strip()
        os.chmod(self.index, 0o600)  # git rewrites it with the umask's mode
        return tree

    def _prepare(self) -> None:
        """Make sure the private index exists, a warm copy of the person's index when there is one."""
        self.index.with_name("index.lock").unlink(missing_ok=True)  # left by a killed run; we are its only user
        if not self.index.exists():
            self._copy_index()
        if self.skipped is None:
            self.skipped = self._huge_untracked()

    def _copy_index(self) -> None:
        source = self.repo.index_file()
        if source.is_file():
            staging = self.index.with_name("index.copy")
            shutil.copyfile(source, staging)
            os.chmod(staging, 0o600)
            os.replace(staging, self.index)

    def _huge_untracked(self) -> list[str]:
        listing = self.repo.git("ls-files", "-z", "-o", "--exclude-standard", "--", ".", *self._excludes,
                                index=self.index).stdout
        paths = [os.fsdecode(p) for p in listing.split(b"\0") if p]
        return sorted(p for p in paths if _size(self.root / p) > HUGE_FILE)

    def _inside(self, folders: list[Path]) -> list[str]:
        found = []
        for folder in folders:
            try:
                found.append(Path(os.path.realpath(folder)).relative_to(self.root).as_posix())
            except ValueError:
                continue
        return found

    def diff(self, old: str, new: str) -> list[Change]:
        return self.repo.tree_changes(old, new)

    def facts(self, snapshot: str) -> dict:
        """What the baseline record says about the repository."""
        return {"head": self.repo.head(), "branch": self.repo.branch(), "skipped": self.skipped or []}

    def keep(self, snapshot: str) -> None:
        """Trees live in the object store; nothing to keep."""

    def restore(self, history) -> bool:
        """Whether the history's reference tree is still in the object store."""
        done = self.repo.git("cat-file", "-e", f"{history.reference}^{{tree}}", ok=(0, 1, 128))
        return done.returncode == 0

    def current(self, paths: list[str]) -> dict[str, str | None]:
        return self.repo.current(paths)

    def blobs(self, oids: list[str], limit: int) -> dict[str, Blob]:
        return self.repo.blobs(oids, limit)


def parse_raw_diff(out: bytes) -> list[Change]:
    """Changes from `git diff-tree -r -z` raw output (`:mode mode oid oid status NUL path NUL` …)."""
    fields = out.split(b"\0")
    changes = []
    for meta, path in zip(fields[0::2], fields[1::2]):
        old_mode, new_mode, old_oid, new_oid, _ = meta.decode().lstrip(":").split(" ")
        changes.append(Change(os.fsdecode(path), _side(old_mode, old_oid), _side(new_mode, new_oid)))
    return changes


def _side(mode: str, oid: str) -> Version | None:
    return None if mode == ABSENT_MODE else Version(mode, oid)


def _parse_batch(out: bytes) -> dict[str, bytes]:
    """Contents from `git cat-file --batch` output: `oid type size LF content LF` for each object."""
    contents, offset = {}, 0
    while offset < len(out):
        end = out.index(b"\n", offset)
        header = out[offset:end].decode().split()
        offset = end + 1
        if len(header) != 3:
            continue
        size = int(header[2])
        contents[header[0]] = out[offset:offset + size]
        offset += size + 1
    return contents


def _exclude(path: str) -> str:
    return f":(exclude,literal){path}"


def _lines(items: list[str]) -> bytes:
    return "".join(f"{item}\n" for item in items).encode()


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _first_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return (fatal or lines or [""])[0]
