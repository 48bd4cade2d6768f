"""Time from launching `python -m khaelor` in a real pty to its first prompt.

Runs the REPL on a fresh pseudo-terminal N times (after warm-ups) in a
throwaway workspace and data root, and prints the median, min and p90 wall
time until the prompt glyph is drawn, beside `python -c pass` for scale.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.pty_session import PtySession  # noqa: E402


def first_prompt_seconds(workspace: Path) -> float:
    started = time.perf_counter()
    term = PtySession([], workspace)
    try:
        term.read_until("❯", timeout=30)
        return time.perf_counter() - started
    finally:
        term.close()


def python_pass_seconds() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(values):7.3f} {ordered[0]:7.3f} {p90:7.3f} {len(values):4d}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--warmups", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        workspace = Path(scratch, "repo")
        workspace.mkdir()
        os.environ["KHAELOR_HOME"] = str(Path(scratch, "home"))
        for _ in range(args.warmups):
            first_prompt_seconds(workspace)
        prompt = [first_prompt_seconds(workspace) for _ in range(args.runs)]
        baseline = [python_pass_seconds() for _ in range(args.runs)]
    print(f"{'wall time (s)':34} {'median':>7} {'min':>7} {'p90':>7} {'N':>4}")
    print(f"{'python -c pass':34} {summary(baseline)}")
    print(f"{'launch to first prompt (pty)':34} {summary(prompt)}")
    print(f"ratio first prompt / python -c pass: {statistics.median(prompt) / statistics.median(baseline):.1f}x")


if __name__ == "__main__":
    main()
