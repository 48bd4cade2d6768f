"""Redaction time on 10 MB adversarial lines: CPU seconds per shape, and the worst.

Each shape is one line of --megabytes MB built to stress a regex-based
redactor: long runs with no terminator, credential prefixes and keys repeated
without ever completing, unterminated quotes and private-key headers, escaped
quotes, separators. A second group is dense with real secrets (every few
bytes a value to replace), which measures the cost per replacement rather than
backtracking. Prints CPU seconds (process time, steady on a shared machine)
and the number of values replaced; asserts nothing.

    python tests/bench/bench_redact.py [--megabytes 10]
"""

import argparse
import random
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
DENSE = {"password=… ": "password=abcdef123 ", "Authorization: ": "Authorization: Bearer abcdefgh12 ",
         "Cookie pairs": "Cookie: a=bcdefgh; ", "JWT-like": "eyJabcdefgh.eyJabcdefgh.abc "}


def line(unit: str | None, size: int) -> str:
    if unit is None:
        rng = random.Random(1)
        return "".join(rng.choices(string.ascii_letters + string.digits + "+/", k=size))
    return (unit * (size // len(unit) + 1))[:size]


def measure(text: str) -> tuple[float, int]:
    found = Redactions()
    started = time.process_time()
    redact_text(text, found)
    return time.process_time() - started, found.total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10.0)
    size = int(parser.parse_args().megabytes * 1_000_000)
    for title, shapes in (("adversarial (backtracking bait)", ADVERSARIAL), ("dense with secrets", DENSE)):
        print(f"{title}, {size / 1e6:g} MB line each:")
        worst = 0.0
        for name, unit in shapes.items():
            seconds, replaced = measure(line(unit, size))
            worst = max(worst, seconds)
            print(f"  {name:18s} {seconds:6.3f} s  {replaced:>9,} replaced")
        print(f"  worst: {worst:.3f} s CPU")


if __name__ == "__main__":
    main()
