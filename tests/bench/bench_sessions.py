"""Listing many sessions: `khaelor sessions list` cold (no catalog) and warm (catalog up to date).

Writes --sessions synthetic logs (default 2,000) into one workspace of a
temporary data root, each a realistic session of a few turns (the record mix
of bench_replay.py: user and assistant entries, request/usage pairs, tool
requests, permissions, file reads and tool results; 30–600 records, tens to
hundreds of KB), then times the real command line in a subprocess:
cold runs delete `.catalog/` first, warm runs find it current. Prints the
medians (and min/max), the store's size, and the in-process time of the
catalog step alone.

With --resume-mb N (default 50; 0 skips it), it also grows a real session
(made by `khaelor -p` against the fake Messages API) to N MB with the same
record mix — each file-changing call closed by its `tree_changes` record, as
a real run writes it — and times `khaelor -p -c` from launch until the fake
API receives its first request. Every run resumes the same grown log (it is
put back before each run), and a run that fails stops the benchmark.

    python tests/bench/bench_sessions.py [--sessions 2000] [--runs 5] [--seed 1] [--resume-mb 50]
"""

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench_replay import MODEL, LogWriter, write_turn  # noqa: E402

from khaelor import catalog  # noqa: E402
from khaelor.changes import is_tracked  # noqa: E402
from khaelor.journal import Journal  # noqa: E402
from khaelor.journal import read_log  # noqa: E402
from khaelor.store import Store, new_session_id  # noqa: E402
from tests.fakeapi import FakeAPI, reply, text  # noqa: E402


def write_sessions(store: Store, workspace: Path, count: int, seed: int) -> int:
    """`count` logs in the workspace's folder; returns their total bytes."""
    rng, total, start = random.Random(seed), 0, time.time() - 90 * 86400
    for number in range(count):
        moment = start + number * 3600 + rng.random()
        session_id = new_session_id(lambda: moment)
        path = store.new_log_path(workspace, session_id)
        header = {"session_id": session_id, "workspace": str(workspace), "created": "2026-05-09T12:00:00.000Z",
                  "parent_session": None, "model": MODEL}
        Journal.create(path, header, lambda: moment).close()
        with open(path, "ab") as handle:
            log = LogWriter(handle, random.Random(rng.random()))
            target = rng.choice((30, 60, 120, 250, 600))
            while log.count < target:
                write_turn(log)
        total += path.stat().st_size
    return total


class TrackedLogWriter(LogWriter):
    """A LogWriter that closes each file-changing call as a real run does: a `tree_changes` before its result.

    Without it every synthetic write, edit or bash call would look like one a
    dead run left open, and each resume would settle thousands of them.
    """

    def __init__(self, handle, rng: random.Random, snapshot: str):
        super().__init__(handle, rng)
        self.snapshot, self.calls = snapshot, {}

    def record(self, kind: str, /, **fields) -> None:
        if kind == "tool_request":
            self.calls[fields["call_id"]] = (fields["name"], fields["input"])
        elif kind == "tool_result" and is_tracked(*self.calls.get(fields["call_id"], (None, None))):
            super().record("tree_changes", call_id=fields["call_id"], by="agent",
                           tool=self.calls[fields["call_id"]][0], to=self.snapshot, changes=[],
                           **{"from": self.snapshot})
        super().record(kind, **fields)


def grow_session(log: Path, megabytes: int, seed: int) -> None:
    """Append synthetic turns to a real log, continuing from its head, until it holds `megabytes` MB."""
    records = read_log(log).records
    head = next((r["id"] for r in reversed(records) if r["type"] == "entry"), None)
    snapshot = next(r["snapshot"] for r in records if r["type"] == "baseline")
    with open(log, "ab") as handle:
        writer = TrackedLogWriter(handle, random.Random(seed), snapshot)
        writer.head, writer.count = head, len(records)
        while handle.tell() < megabytes << 20:
            write_turn(writer)


def time_resume(temp: Path, megabytes: int, runs: int, seed: int) -> list[float]:
    """Seconds from launching `khaelor -p -c` to the first request the fake API receives."""
    home, workspace = temp / "resume-home", temp / "resume-repo"
    workspace.mkdir()
    env = dict(os.environ, KHAELOR_HOME=str(home), ANTHROPIC_API_KEY="bench-key")
    times = []
    with FakeAPI() as api:
        env["ANTHROPIC_BASE_URL"] = api.base_url
        api.script(reply(text("ok")))
        subprocess.run([sys.executable, "-m", "khaelor", "-p", "start"], cwd=workspace, env=env, check=True,
                       capture_output=True)
        (log,) = home.glob("sessions/*/*.jsonl")
        grow_session(log, megabytes, seed)
        grown = shutil.copy(log, temp / "grown.jsonl")
        print(f"resume log: {log.stat().st_size / 1e6:.1f} MB, {len(read_log(log).records)} records")
        for _ in range(runs):
            shutil.copyfile(grown, log)
            api.script(reply(text("ok")))
            seen = len(api.message_requests)
            started = time.perf_counter()
            process = subprocess.Popen([sys.executable, "-m", "khaelor", "-p", "-c", "next"], cwd=workspace,
                                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            api.wait_for_requests(seen + 1, timeout=120)
            times.append(time.perf_counter() - started)
            _, errors = process.communicate(timeout=120)
            if process.returncode:
                raise SystemExit(f"-p -c failed ({process.returncode}): {errors.decode(errors='replace')}")
    return times


def run_list(home: Path, workspace: Path) -> float:
    env = dict(os.environ, KHAELOR_HOME=str(home))
    env.pop("KHAELOR_DEBUG", None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "khaelor", "sessions", "list"], cwd=workspace, env=env,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"sessions list failed: {done.stderr}")
    return elapsed


def describe(label: str, times: list[float]) -> str:
    return f"{label:<34} median {statistics.median(times):6.3f} s   min {min(times):6.3f}   max {max(times):6.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000, help="number of sessions (default 2000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each kind (default 5)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the synthetic sessions (default 1)")
    parser.add_argument("--resume-mb", type=int, default=50, help="size of the resumed log in MB (0: skip)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="khaelor-bench-") as temp:
        home, workspace = Path(temp) / "home", Path(temp) / "repo"
        workspace.mkdir()
        store = Store(home / "sessions", home)
        started = time.perf_counter()
        size = write_sessions(store, workspace.resolve(), args.sessions, args.seed)
        print(f"{args.sessions} sessions, {size / 1e6:.1f} MB (mean {size / args.sessions / 1e3:.0f} KB), "
              f"written in {time.perf_counter() - started:.1f} s")
        catalog_dir = store.root / catalog.CATALOG_DIR
        cold = []
        for _ in range(args.runs):
            shutil.rmtree(catalog_dir, ignore_errors=True)
            cold.append(run_list(home, workspace))
        warm = [run_list(home, workspace) for _ in range(args.runs)]
        logs, scope = store.sessions_of(workspace.resolve()), [store.workspace_dir(workspace.resolve())]
        step = []
        for _ in range(args.runs):
            started = time.perf_counter()
            catalog.summaries(store.root, logs, scope)
            step.append(time.perf_counter() - started)
        print(describe("sessions list, cold (no catalog)", cold))
        print(describe("sessions list, warm", warm))
        print(describe("  catalog step alone, warm", step))
        if args.resume_mb:
            resumed = time_resume(Path(temp), args.resume_mb, args.runs, args.seed)
            print(describe(f"-p -c of a {args.resume_mb} MB log, to 1st request", resumed))


if __name__ == "__main__":
    main()
