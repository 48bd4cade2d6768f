"""Snapshots without side effects: git through a private index, and the content-hash fallback (repos in tmp_path)."""

import os
import subprocess
from pathlib import Path

import pytest

from khaelor.changes import Change, ChangeHistory, Version
from khaelor.filesnapshot import FileSnapshots
from khaelor.gitbase import HUGE_FILE, GitSnapshots, NoRepository, Repo

AUTHOR = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **AUTHOR}, capture_output=True, check=True)
    return done.stdout.decode("utf-8", "surrogateescape")


def untouchables(repo: Path) -> dict:
    """Everything of the person's that a snapshot must leave exactly as it was."""
    index = repo / ".git" / "index"
    return {
        "status": git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all"),
        "stash": git(repo, "stash", "list"),
        "refs": git(repo, "for-each-ref"),
        "head": (repo / ".git" / "HEAD").read_bytes(),
        "index": index.read_bytes() if index.exists() else None,
        "config": (repo / ".git" / "config").read_bytes(),
    }


@pytest.fixture
def repo(workspace) -> Path:
    """A repo with a commit, a stash entry, staged, unstaged, untracked and ignored work."""
    for name, text in {"staged.txt": "s\n", "unstaged.txt": "u\n", ".gitignore": "*.log\n", "kept.txt": "k\n"}.items():
        (workspace / name).write_text(text)
    git(workspace, "add", "-A")
    git(workspace, "commit", "-qm", "first")
    (workspace / "kept.txt").write_text("stashed\n")
    git(workspace, "stash", "-q")
    (workspace / "staged.txt").write_text("s staged\n")
    git(workspace, "add", "staged.txt")
    (workspace / "unstaged.txt").write_text("u unstaged\n")
    (workspace / "untracked.txt").write_text("new\n")
    (workspace / "noise.log").write_text("ignored\n")
    return workspace


def snapshots(repo: Path, tmp_path: Path, **kwargs) -> GitSnapshots:
    folder = tmp_path / "snap"
    folder.mkdir(exist_ok=True)
    return GitSnapshots(Repo.find(repo, dict(os.environ)), folder, kwargs.pop("exclude", []), **kwargs)


def tree_files(repo: Path, tree: str) -> dict[str, str]:
    listing = git(repo, "ls-tree", "-r", "-z", tree).split("\0")
    return {row.split("\t", 1)[1]: row.split()[2] for row in listing if row}


def test_snapshot_holds_all_non_ignored_work_and_touches_nothing(repo, tmp_path):
    before = untouchables(repo)
    snap = snapshots(repo, tmp_path)
    tree = snap.snapshot()
    files = tree_files(repo, tree)
    assert sorted(files) == [".gitignore", "kept.txt", "staged.txt", "unstaged.txt", "untracked.txt"]
    assert git(repo, "cat-file", "-p", files["unstaged.txt"]) == "u unstaged\n"
    assert git(repo, "cat-file", "-p", files["staged.txt"]) == "s staged\n"
    assert snap.snapshot() == tree
    assert untouchables(repo) == before
    assert oct((tmp_path / "snap" / "index").stat().st_mode & 0o777) == "0o600"


def test_tracked_file_matching_gitignore_stays_in_the_snapshot(repo, tmp_path):
    (repo / "tracked.log").write_text("tracked anyway\n")
    git(repo, "add", "-f", "tracked.log")
    assert "tracked.log" in tree_files(repo, snapshots(repo, tmp_path).snapshot())


def test_changes_between_snapshots_cover_every_kind_and_odd_names(repo, tmp_path):
    snap = snapshots(repo, tmp_path)
    first = snap.snapshot()
    odd = ["with space.txt", "new\nline.txt", "ünïcödé ☃.txt", "-dash.txt", ":(glob)*.txt"]
    for name in odd:
        (repo / name).write_text(name + "\n")
    (repo / "unstaged.txt").write_text("changed again\n")
    (repo / "untracked.txt").unlink()
    os.chmod(repo / "kept.txt", 0o755)
    os.symlink("kept.txt", repo / "link")
    second = snap.snapshot()
    changes = {c.path: c for c in snap.diff(first, second)}
    assert sorted(changes) == sorted([*odd, "unstaged.txt", "untracked.txt", "kept.txt", "link"])
    assert changes["untracked.txt"].after is None and changes["with space.txt"].before is None
    assert (changes["kept.txt"].before.mode, changes["kept.txt"].after.mode) == ("100644", "100755")
    assert changes["link"].after.mode == "120000"
    current = snap.current(list(changes))
    assert all(current[p] == (c.after.oid if c.after else None) for p, c in changes.items())
    assert snap.diff(second, second) == []


def test_blobs_give_content_up_to_a_limit_and_size_beyond(repo, tmp_path):
    (repo / "small.txt").write_bytes(b"tiny\n")
    (repo / "big.bin").write_bytes(b"\0" * 5000)
    snap = snapshots(repo, tmp_path)
    files = tree_files(repo, snap.snapshot())
    blobs = snap.blobs([files["small.txt"], files["big.bin"], "0" * 40], limit=1000)
    assert blobs[files["small.txt"]].data == b"tiny\n"
    assert blobs[files["big.bin"]].data is None and blobs[files["big.bin"]].size == 5000
    assert blobs["0" * 40].data is None and blobs["0" * 40].size is None


def test_empty_repository_and_detached_head(workspace, tmp_path):
    (workspace / "a.txt").write_text("a\n")
    snap = snapshots(workspace, tmp_path)
    tree = snap.snapshot()
    facts = snap.facts(tree)
    assert facts["head"] is None and facts["branch"] in ("master", "main")
    assert list(tree_files(workspace, tree)) == ["a.txt"]
    assert not (workspace / ".git" / "index").exists()
    git(workspace, "add", "a.txt")
    git(workspace, "commit", "-qm", "one")
    head = git(workspace, "rev-parse", "HEAD").strip()
    git(workspace, "checkout", "-q", "--detach")
    assert snap.facts(snap.snapshot()) == {"head": head, "branch": None, "skipped": []}


def test_outside_a_work_tree_or_without_git_there_is_no_repository(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(NoRepository, match="not a git work tree"):
        Repo.find(plain, dict(os.environ))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    with pytest.raises(NoRepository, match="git is not installed"):
        Repo.find(plain, {**os.environ, "PATH": str(empty)})


def test_subdirectory_workspace_snapshots_the_whole_work_tree(repo, tmp_path):
    sub = repo / "pkg"
    sub.mkdir()
    (sub / "mod.py").write_text("x = 1\n")
    snap = GitSnapshots(Repo.find(sub, dict(os.environ)), tmp_path, [])
    assert snap.root == repo and "pkg/mod.py" in tree_files(repo, snap.snapshot())


def test_huge_untracked_files_and_our_own_data_folder_are_left_out(repo, tmp_path):
    with open(repo / "huge.bin", "wb") as handle:
        handle.truncate(HUGE_FILE + 1)
    data = repo / ".khaelor-data"
    data.mkdir()
    (data / "session.jsonl").write_text("{}\n")
    snap = snapshots(repo, tmp_path, exclude=[data])
    tree = snap.snapshot()
    assert "huge.bin" not in tree_files(repo, tree) and ".khaelor-data/session.jsonl" not in tree_files(repo, tree)
    assert snap.facts(tree)["skipped"] == ["huge.bin"]


def test_a_damaged_private_index_or_a_stale_lock_is_not_fatal(repo, tmp_path):
    snap = snapshots(repo, tmp_path)
    tree = snap.snapshot()
    (tmp_path / "snap" / "index").write_bytes(b"garbage")
    (tmp_path / "snap" / "index.lock").write_bytes(b"")
    assert snap.snapshot() == tree


def test_restore_knows_whether_the_reference_tree_still_exists(repo, tmp_path):
    snap = snapshots(repo, tmp_path)
    assert snap.restore(ChangeHistory(reference=snap.snapshot()))
    assert not snap.restore(ChangeHistory(reference="1" * 40))


# --- the fallback ---------------------------------------------------------------


def files_snapshots(root: Path, tmp_path: Path, exclude=()) -> FileSnapshots:
    return FileSnapshots(root, tmp_path / "fsnap", list(exclude), "not a git work tree")


def test_file_snapshots_find_the_same_kinds_of_change(tmp_path):
    root = tmp_path / "plain"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    (root / "sub" / "gone.txt").write_text("g\n")
    (root / ".git").mkdir()
    (root / ".git" / "ignored").write_text("x")
    snap = files_snapshots(root, tmp_path)
    first = snap.snapshot()
    (root / "a.txt").write_text("A\n")
    (root / "sub" / "gone.txt").unlink()
    (root / "new\nname ☃.txt").write_text("n\n")
    os.chmod(root / "a.txt", 0o755)
    os.symlink("a.txt", root / "link")
    second = snap.snapshot()
    changes = {c.path: c for c in snap.diff(first, second)}
    assert sorted(changes) == sorted(["a.txt", "sub/gone.txt", "new\nname ☃.txt", "link"])
    assert changes["a.txt"].after.mode == "100755" and changes["link"].after.mode == "120000"
    assert snap.current(list(changes)) == {p: c.after.oid if c.after else None for p, c in changes.items()}
    kept = snap.blobs([changes["sub/gone.txt"].before.oid], 1000)
    assert kept[changes["sub/gone.txt"].before.oid].data == b"g\n"
    assert oct((tmp_path / "fsnap" / "objects").stat().st_mode & 0o777) == "0o700"


def test_a_same_size_rewrite_within_the_timestamp_granularity_is_seen(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    target = root / "f.txt"
    target.write_text("aaaa")
    snap = files_snapshots(root, tmp_path)
    first = snap.snapshot()
    stamp = target.stat().st_mtime_ns
    target.write_text("bbbb")
    os.utime(target, ns=(stamp, stamp))
    assert [c.path for c in snap.diff(first, snap.snapshot())] == ["f.txt"]


def test_unchanged_old_files_are_not_read_again(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "old.txt").write_text("old\n")
    os.utime(root / "old.txt", (1, 1))
    snap = files_snapshots(root, tmp_path)
    first = snap.snapshot()
    (root / "old.txt").write_text("new\n")  # same size, same inode, and the old mtime put back:
    os.utime(root / "old.txt", (1, 1))      # only reading the file again could tell
    fresh = files_snapshots(root, tmp_path)  # a new run reads the stat cache from disk
    assert fresh.snapshot() == first


def test_file_snapshots_skip_excluded_folders_and_summarize_huge_files(tmp_path):
    root = tmp_path / "plain"
    data = root / "data-root"
    data.mkdir(parents=True)
    (data / "log.jsonl").write_text("{}\n")
    with open(root / "huge.bin", "wb") as handle:
        handle.truncate(HUGE_FILE + 1)
    snap = files_snapshots(root, tmp_path, exclude=[data])
    snap.snapshot()
    oid = snap.current(["huge.bin"])["huge.bin"]
    assert oid.startswith("stat:") and snap.blobs([oid], 10)[oid].size == HUGE_FILE + 1
    assert snap.facts(snap.snapshot())["files"] == 1


def test_file_snapshots_restore_the_reference_from_the_baseline_and_the_changes(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    snap = files_snapshots(root, tmp_path)
    base = snap.snapshot()
    snap.keep(base)
    (root / "a.txt").write_text("b\n")
    (root / "c.txt").write_text("c\n")
    later = snap.snapshot()
    changes = snap.diff(base, later)
    resumed = files_snapshots(root, tmp_path)
    assert resumed.restore(ChangeHistory(anchor=base, reference=later, since_anchor=[changes]))
    assert resumed.diff(later, resumed.snapshot()) == []
    wrong = [Change("a.txt", None, Version("100644", "0" * 64))]
    damaged = ChangeHistory(anchor=base, reference=later, since_anchor=[wrong])
    assert not files_snapshots(root, tmp_path).restore(damaged)
