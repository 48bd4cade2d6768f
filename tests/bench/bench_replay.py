"""Resume cost: reading and replaying a long session log into state and API messages.

Writes a synthetic log of --records records (default 20,000) with the mix a
real session produces — user and assistant entries with tool_use blocks,
request/usage pairs, tool_request, permission, tool_start, file_read,
tool_result, tool_results entries and a few head moves — then times
`read_log` + `SessionState.from_records` + `state.messages()` over --runs
runs. Prints the median (and each stage's median) in ms, the file size,
records/s, and peak memory: the tracemalloc peak of one extra untimed run,
and the growth of the process's max RSS across the timed runs.

    python tests/bench/bench_replay.py [--records 20000] [--runs 7] [--seed 1]
"""

import argparse
import collections
import random
import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from khaelor.journal import Journal, encode_record, read_log
from khaelor.session import SessionState

MODEL = "claude-sonnet-4-5"
TOOLS = ("read", "bash", "grep", "edit", "glob")
WORDS = ("the journal replay state record session tool result file test fix line error return value "
         "def class import self path bytes append header branch entry usage model").split()


class LogWriter:
    """Appends encoded records to an open file, keeping the head, the turn ends and a record count."""

    def __init__(self, handle, rng: random.Random):
        self.handle, self.rng = handle, rng
        self.count, self.entries, self.head, self.turn_ends = 1, 0, None, []

    def record(self, kind: str, /, **fields) -> None:
        ts = f"2026-05-09T12:{self.count // 60 % 60:02d}:{self.count % 60:02d}.000Z"
        self.handle.write(encode_record({"type": kind, "v": 1, "ts": ts, **fields}))
        self.count += 1

    def entry(self, kind: str, message: dict | None, /, **fields) -> None:
        entry_id = f"{self.entries:08x}"
        self.record("entry", id=entry_id, parent=self.head, kind=kind, message=message, **fields)
        self.head = entry_id
        self.entries += 1

    def text(self, words: int) -> str:
        return " ".join(self.rng.choices(WORDS, k=words))


def write_turn(log: LogWriter) -> None:
    """One request of the person: a user entry, a few tool rounds, a final answer."""
    rng = log.rng
    log.entry("user", {"role": "user", "content": [{"type": "text", "text": log.text(rng.randint(10, 60))}]})
    for _ in range(rng.randint(1, 6)):
        uses = [{"type": "tool_use", "id": f"toolu_{log.count:020d}_{n}", "name": rng.choice(TOOLS),
                 "input": {"path": f"khaelor/{rng.choice(WORDS)}.py", "command": log.text(6)}}
                for n in range(rng.randint(1, 3))]
        model_reply(log, [{"type": "text", "text": log.text(rng.randint(5, 80))}, *uses], "tool_use")
        blocks = [run_tool(log, use) for use in uses]
        log.entry("tool_results", {"role": "user", "content": blocks})
    model_reply(log, [{"type": "text", "text": log.text(rng.randint(20, 200))}], "end_turn")
    log.turn_ends.append(log.head)


def model_reply(log: LogWriter, content: list[dict], stop_reason: str) -> None:
    attempt = f"{log.count:08x}"
    log.record("request", attempt=attempt, model=MODEL, operation="turn", number=1)
    usage = {"input_tokens": log.rng.randint(5, 500), "output_tokens": log.rng.randint(50, 2000),
             "cache_read_input_tokens": log.rng.randint(0, 90_000), "cache_creation_input_tokens": 0}
    log.record("usage", attempt=attempt, model=MODEL, operation="turn", request_id=f"req_{attempt}",
               message_id=f"msg_{attempt}", usage=usage)
    log.entry("assistant", {"role": "assistant", "content": content}, model=MODEL,
              stop_reason=stop_reason, message_id=f"msg_{attempt}")


def run_tool(log: LogWriter, use: dict) -> dict:
    """Journal one allowed call and return its tool_result block."""
    call_id = use["id"]
    log.record("tool_request", call_id=call_id, name=use["name"], input=use["input"])
    log.record("permission", call_id=call_id, decision="allow", reason="read-only tool", rule=None, source="default")
    log.record("tool_start", call_id=call_id)
    if use["name"] == "read":
        log.record("file_read", path=f"/home/dev/repo/{use['input']['path']}", size=log.rng.randint(100, 40_000),
                   mtime_ns=1_778_000_000_000_000_000 + log.count, sha256=f"{log.count:064x}")
    content = log.text(log.rng.choice((20, 80, 300, 1200)))
    log.record("tool_result", call_id=call_id, is_error=False, content=content, duration_ms=log.rng.randint(1, 9000))
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def write_log(path: Path, records: int, seed: int) -> int:
    """A log of at least `records` records (header by the real Journal); returns the count."""
    Journal.create(path, {"session_id": "bench", "workspace": "/home/dev/repo", "model": MODEL}, time.time).close()
    with open(path, "ab") as handle:
        log = LogWriter(handle, random.Random(seed))
        rewinds = {records * k // 4 for k in (1, 2, 3)}
        while log.count < records:
            write_turn(log)
            if rewinds and log.count >= min(rewinds):
                rewinds.discard(min(rewinds))
                log.head = log.rng.choice(log.turn_ends[len(log.turn_ends) // 2:])  # a rewind
                log.record("head", entry=log.head)
        return log.count


def replay(path: Path) -> tuple[list[float], int]:
    """Seconds spent in read_log, from_records and messages(); the number of messages."""
    t0 = time.perf_counter()
    contents = read_log(path)
    t1 = time.perf_counter()
    state = SessionState.from_records(contents.records)
    t2 = time.perf_counter()
    messages = state.messages()
    t3 = time.perf_counter()
    return [t1 - t0, t2 - t1, t3 - t2, t3 - t0], len(messages)


def measure(path: Path, runs: int) -> tuple[list[tuple[float, ...]], int, float, float]:
    """Per-stage times of each run, messages on the branch, tracemalloc peak MB, max RSS growth MB."""
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results = [replay(path) for _ in range(runs)]
    rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    tracemalloc.start()
    replay(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    stages = list(zip(*(times for times, _ in results)))
    return stages, results[0][1], peak / 1e6, rss_growth / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000, help="approximate log length (default 20000)")
    parser.add_argument("--runs", type=int, default=7, help="timed replays (default 7)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the synthetic session (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        count = write_log(path, args.records, args.seed)
        size_mb = path.stat().st_size / 1e6
        stages, messages, peak_mb, rss_mb = measure(path, args.runs)
        mix = collections.Counter(record["type"] for record in read_log(path).records)
    total = statistics.median(stages[3])
    print(f"log: {count} records, {size_mb:.1f} MB, {messages} messages on the head branch; {args.runs} runs")
    print("mix: " + ", ".join(f"{kind} {n}" for kind, n in mix.most_common()))
    print(f"{'stage':<26} {'median ms':>10} {'min ms':>8}")
    for label, times in zip(("read_log", "SessionState.from_records", "state.messages()", "total"), stages):
        print(f"{label:<26} {statistics.median(times) * 1000:>10.1f} {min(times) * 1000:>8.1f}")
    print(f"records/s {count / total:,.0f}   MB/s {size_mb / total:.1f}")
    print(f"peak memory: tracemalloc {peak_mb:.1f} MB ({peak_mb / size_mb:.1f}x the file), "
          f"max RSS grew {rss_mb:.1f} MB over the timed runs")


if __name__ == "__main__":
    main()
