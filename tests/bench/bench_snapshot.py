"""Change-attribution cost: the snapshots taken around each tool call, on a generated repository.

Builds a git repository of --files files (default 10,000) in 100 folders,
committed, then measures with the private index of `GitSnapshots`:

* cold: the first snapshot of a session (copying the person's index, listing
  untracked files, `git add -A`, `git write-tree`), each in a fresh folder;
* per snapshot: one snapshot after a tool call rewrote one file;
* per tool call: what the watcher does around one call — a snapshot before,
  the call's one-file edit, a snapshot after, and the `diff-tree` between.

The same figures follow for the file-state fallback (`FileSnapshots`) on the
same tree, for comparison. Target for git: under 100 ms per snapshot.

    python tests/bench/bench_snapshot.py [--files 10000] [--runs 21] [--dir PATH]
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from khaelor.filesnapshot import FileSnapshots
from khaelor.gitbase import GitSnapshots, Repo

AUTHOR = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
          "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def make_repo(root: Path, files: int) -> None:
    """`files` small Python-like files in 100 folders of 7 subfolders, committed."""
    for n in range(files):
        folder = root / f"pkg{n % 100:02d}" / f"mod{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{n}.py").write_text(f"# file {n}\n" + "value = 1\n" * (n % 40 + 1))
    env = {**os.environ, **AUTHOR}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "generated"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def cold(make, runs: int) -> list[float]:
    """Seconds of the first snapshot, each in a new snapshot folder."""
    return [timed(make(index).snapshot) for index in range(runs)]


def per_call(snap, root: Path, runs: int) -> tuple[list[float], list[float]]:
    """Seconds of one snapshot after a one-file edit, and of a whole tool call's tracking."""
    reference = snap.snapshot()
    singles, calls = [], []
    for run in range(runs):
        target = root / f"pkg{run % 100:02d}" / "mod0" / f"file{run % 100}.py"
        start = time.perf_counter()
        before = snap.snapshot()
        snap.diff(reference, before)
        target.write_text(f"# edited in run {run}\n")
        middle = time.perf_counter()
        reference = snap.snapshot()
        singles.append(time.perf_counter() - middle)
        snap.diff(before, reference)
        calls.append(time.perf_counter() - start)
    return singles, calls


def row(label: str, times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    return f"{label:<34} {statistics.median(ms):>9.1f} {ms[0]:>8.1f} {ms[int(len(ms) * 0.9) - 1]:>8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the generated repository (default 10000)")
    parser.add_argument("--runs", type=int, default=21, help="timed runs of each measurement (default 21)")
    parser.add_argument("--dir", help="where to build the repository (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root, state = Path(tmp) / "repo", Path(tmp) / "state"
        root.mkdir()
        make_repo(root, args.files)
        repo = Repo.find(root, dict(os.environ))
        git_cold = cold(lambda n: GitSnapshots(repo, _folder(state / f"git-cold-{n}"), []), args.runs)
        git_single, git_call = per_call(GitSnapshots(repo, _folder(state / "git"), []), root, args.runs)
        files_cold = cold(lambda n: FileSnapshots(root, state / f"files-cold-{n}", []), min(args.runs, 5))
        files_single, files_call = per_call(FileSnapshots(root, state / "files", []), root, args.runs)
    print(f"repository: {args.files} files, committed; {args.runs} runs; {os.cpu_count()} CPUs")
    print(f"{'measurement':<34} {'median ms':>9} {'min ms':>8} {'p90 ms':>8}")
    print(row("git: cold first snapshot", git_cold))
    print(row("git: snapshot after a 1-file edit", git_single))
    print(row("git: tracking of one tool call", git_call))
    print(row("files: cold first snapshot", files_cold))
    print(row("files: snapshot after a 1-file edit", files_single))
    print(row("files: tracking of one tool call", files_call))
    verdict = "meets" if statistics.median(git_single) < 0.1 else "MISSES"
    print(f"git per-snapshot median {statistics.median(git_single) * 1000:.1f} ms: {verdict} the 100 ms target")


def _folder(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True)
    return path


if __name__ == "__main__":
    main()
