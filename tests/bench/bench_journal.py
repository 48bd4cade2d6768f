"""Durable append rate of the session log: records per second and per-append latency, fsync included.

Creates a log in a temporary directory (or under --dir, to measure another
file system) and appends --records records through `Journal.append`, each
one written and fsynced: first a ~300-byte conversation entry, then an 8 KiB
tool_result. Prints records/s and the median and p99 latency of one append
in microseconds.

    python tests/bench/bench_journal.py [--records 2000] [--dir PATH]
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from khaelor.journal import Journal, encode_record

HEADER = {"session_id": "bench", "workspace": "/tmp/bench", "model": "claude-sonnet-4-5"}
PROMPT = ("Run the test suite, then fix the failing test in tests/test_journal.py: the torn-tail "
          "backup should be owner-private. Keep the change small and explain it.")


def entry_fields(number: int) -> dict:
    """A user entry with a message, about 300 bytes once journaled."""
    return {"id": f"{number:08x}", "parent": f"{number - 1:08x}", "kind": "user",
            "message": {"role": "user", "content": [{"type": "text", "text": PROMPT}]}}


def tool_result_fields(number: int) -> dict:
    """A tool_result carrying 8 KiB of command output."""
    line = "tests/test_journal.py::test_append_is_one_line PASSED                 [ 42%]\n"
    content = (line * (8192 // len(line) + 1))[:8192]
    return {"call_id": f"toolu_{number:020d}", "is_error": False, "content": content, "duration_ms": 1234}


def fs_type(path: Path) -> str:
    """The file system type holding `path`, from /proc/self/mounts (Linux), else '?'."""
    target, best, kind = str(path.resolve()), "", "?"
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                _, point, fstype, *_ = line.split()
                inside = target == point or target.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, kind = point, fstype
    except OSError:
        pass
    return kind


def measure(directory: Path, kind: str, make_fields, records: int) -> tuple[int, float, list[int]]:
    """Append `records` records to a fresh log; returns bytes each, total seconds, nanoseconds per append."""
    journal = Journal.create(directory / f"{kind}.jsonl", HEADER, time.time)
    latencies = []
    try:
        started = time.perf_counter()
        for number in range(1, records + 1):
            fields = make_fields(number)
            before = time.perf_counter_ns()
            journal.append(kind, **fields)
            latencies.append(time.perf_counter_ns() - before)
        total = time.perf_counter() - started
    finally:
        journal.close()
    size = len(encode_record({"type": kind, "v": 1, "ts": "2026-01-01T00:00:00.000Z", **make_fields(1)}))
    return size, total, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000, help="appends per record kind (default 2000)")
    parser.add_argument("--dir", type=Path, help="where to create the logs (default: the system temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"log directory {directory} ({fs_type(directory)}), {args.records} appends each, fsync on every append")
        print(f"{'record':<22} {'bytes':>6} {'records/s':>10} {'MB/s':>6} {'median us':>10} {'p99 us':>8}")
        for kind, make_fields, label in (("entry", entry_fields, "entry (user message)"),
                                         ("tool_result", tool_result_fields, "tool_result 8 KiB")):
            size, total, latencies = measure(directory, kind, make_fields, args.records)
            median_us = statistics.median(latencies) / 1000
            p99_us = statistics.quantiles(latencies, n=100)[98] / 1000
            rate = args.records / total
            print(f"{label:<22} {size:>6} {rate:>10.0f} {rate * size / 1e6:>6.2f} {median_us:>10.0f} {p99_us:>8.0f}")


if __name__ == "__main__":
    main()
