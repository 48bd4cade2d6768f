"""Redaction time on 10 MB adversarial lines: CPU seconds per shape, and the worst.

Each shape is one line of --megabytes MB built to stress a regex-based
redactor: long runs with no terminator, credential prefixes and keys repeated
without ever completing, unterminated quotes and private-key headers, escaped
quotes, separators. A second group holds shapes found later: `&` before a
letter, and units that made some rules scan a run again from every key or
position inside it (a cookie header without `=`, keys before a bracket). A
third group is dense with real secrets (every few bytes a value to replace),
which measures the cost per replacement rather than backtracking. Prints the
median CPU seconds of --repeat runs (process time, steadier than wall time on
a shared machine) and the number of values replaced; asserts nothing.

    python tests/bench/bench_redact.py [--megabytes 10] [--repeat 3]
"""

import argparse
import random
import statistics
import string
import time

from khaelor.redact import Redactions, redact_text

ADVERSARIAL = {
    "one letter": "a", "random base64": None, "ghp_ prefix": "ghp_", "sk-ant- prefix": "sk-ant-", "sk- prefix": "sk-",
    "eyJ prefix": "eyJ", "PEM header": "-----BEGIN RSA PRIVATE KEY-----", "dashes": "-", "key=": "key=",
    "ikey=": "ikey=", "pass": "pass", "secret=x ": "secret=x ", "open quote": '"password": "', "escaped quote": '\\"',
    "backslash": "\\", "scheme": "a://", "userinfo": "s://u:p", "ampersand": "&", "query": "?token=",
    "AKIA": "AKIA", "flag": "--password ", "ANSI": "\x1b[31m", "CJK": "密钥「」",
}
LATER = {"&a": "&a", "cookie, no =": "Cookie: " + "a" * 8184, "token=…(": "token=" * 680 + "(",
         "api_key:…[": "api_key:" * 400 + "["}
DENSE = {"password=… ": "password=abcdef123 ", "Authorization: ": "Authorization: Bearer abcdefgh12 ",
         "Cookie pairs": "Cookie: a=bcdefgh; ", "JWT-like": "eyJabcdefgh.eyJabcdefgh.abc "}


def line(unit: str | None, size: int) -> str:
    if unit is None:
        rng = random.Random(1)
        return "".join(rng.choices(string.ascii_letters + string.digits + "+/", k=size))
    return (unit * (size // len(unit) + 1))[:size]


def measure(text: str, repeat: int) -> tuple[float, int]:
    """Median CPU seconds of `repeat` redactions of `text`, and how many values one replaces."""
    seconds = []
    for _ in range(repeat):
        found = Redactions()
        started = time.process_time()
        redact_text(text, found)
        seconds.append(time.process_time() - started)
    return statistics.median(seconds), found.total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3, help="runs per shape; the median is printed")
    args = parser.parse_args()
    size = int(args.megabytes * 1_000_000)
    groups = (("adversarial (backtracking bait)", ADVERSARIAL), ("adversarial, found later", LATER),
              ("dense with secrets", DENSE))
    for title, shapes in groups:
        print(f"{title}, {size / 1e6:g} MB line each, median of {args.repeat}:")
        worst = 0.0
        for name, unit in shapes.items():
            seconds, replaced = measure(line(unit, size), args.repeat)
            worst = max(worst, seconds)
            print(f"  {name:18s} {seconds:6.3f} s  {replaced:>9,} replaced", flush=True)
        print(f"  worst: {worst:.3f} s CPU")


if __name__ == "__main__":
    main()
