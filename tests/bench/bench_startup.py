"""Cold start of the command line: how long `--version` and `--help` take, and what they import.

Measures the wall time of `python -m khaelor --version` and `--help` as
subprocesses (median, min, p90 over N runs after warm-ups), next to
`python -c pass` and `python -c "import anthropic"` for scale; then counts
the modules each path imports (`-X importtime`) and checks that none of the
heavy packages is among them. Exits 1 if one is.

    python tests/bench/bench_startup.py [--runs 15] [--warmups 2] [--scale-runs 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HEAVY = ("anthropic", "prompt_toolkit", "httpx2", "pydantic")


def wall_times(argv: list[str], runs: int, warmups: int, env: dict) -> list[float]:
    """Seconds per run of `argv`, warm-up runs discarded."""
    times = []
    for number in range(warmups + runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        if number >= warmups:
            times.append(time.perf_counter() - started)
    return times


def imported_modules(argv: list[str], env: dict) -> list[str]:
    """Names of the modules `argv` imports, from `-X importtime` on stderr."""
    done = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True,
                          env=env, check=True)
    names = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "imported package" not in line:
            names.append(line.rsplit("|", 1)[1].strip())
    return names


def heavy_in(modules: list[str]) -> list[str]:
    """The heavy packages whose top-level name appears among `modules`."""
    tops = {name.split(".")[0] for name in modules}
    return [name for name in HEAVY if name in tops]


def row(label: str, times: list[float]) -> str:
    p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0]
    return f"{label:<34} {statistics.median(times):>7.3f} {min(times):>7.3f} {p90:>7.3f} {len(times):>4}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per khaelor command (default 15)")
    parser.add_argument("--warmups", type=int, default=2, help="untimed runs first (default 2)")
    parser.add_argument("--scale-runs", type=int, default=5,
                        help="timed runs of `import anthropic`, which is slow (default 5)")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    args = parser.parse_args()
    py = args.python
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "KHAELOR_HOME": home}
        commands = {
            "python -c pass": ([py, "-c", "pass"], args.runs),
            "python -m khaelor --version": ([py, "-m", "khaelor", "--version"], args.runs),
            "python -m khaelor --help": ([py, "-m", "khaelor", "--help"], args.runs),
            'python -c "import anthropic"': ([py, "-c", "import anthropic"], args.scale_runs),
        }
        medians = {}
        print(f"{'wall time (s)':<34} {'median':>7} {'min':>7} {'p90':>7} {'N':>4}")
        for label, (argv, runs) in commands.items():
            times = wall_times(argv, runs, args.warmups, env)
            medians[label] = statistics.median(times)
            print(row(label, times))
        bare = imported_modules([py, "-c", "pass"], env)
        paths = {flag: imported_modules([py, "-m", "khaelor", flag], env) for flag in ("--version", "--help")}
    version, anthropic = medians["python -m khaelor --version"], medians['python -c "import anthropic"']
    print(f"\nratio --version / python -c pass:      {version / medians['python -c pass']:.1f}x")
    print(f"ratio import anthropic / --version:    {anthropic / version:.1f}x")
    print(f"\nmodules imported: python -c pass {len(bare)}", end="")
    for flag, modules in paths.items():
        print(f", {flag} {len(modules)} (+{len(modules) - len(bare)})", end="")
    print()
    found = sorted({name for modules in paths.values() for name in heavy_in(modules)})
    if found:
        print(f"FAIL: heavy packages imported at startup: {', '.join(found)}")
        sys.exit(1)
    print(f"heavy packages imported: none of {', '.join(HEAVY)}")


if __name__ == "__main__":
    main()
