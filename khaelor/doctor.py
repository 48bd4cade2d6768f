"""`khaelor doctor`: read-mostly health checks, without starting an agent (SPEC §10).

Each check is a function returning one `Check`: ok, warn or fail, a detail,
and for anything but ok a hint that says how to fix it. Checks never print a
credential, never import the SDK (versions come from package metadata), and
never change the store: a damaged catalog or log is reported, not repaired.
The exit status is 1 when any check fails.
"""

import argparse
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from khaelor.env import Env
from khaelor.errors import ConfigError, ExitStatus, JournalError, UsageError

MIN_PYTHON = (3, 11)
CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
SHOWN = 3


@dataclass
class Check:
    """The outcome of one check."""

    status: str
    name: str
    detail: str
    hint: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name:<12} {self.detail}"
        return text + (f" — fix: {self.hint}" if self.hint and self.status != "ok" else "")


@dataclass
class Situation:
    """What the checks look at: the environment, the workspace, the config (if it loads) and the store."""

    env: Env
    workspace: Path
    session_dir: str | None
    config: object = None
    config_error: str | None = None

    def load(self) -> None:
        from khaelor.config import Config, load_config

        overrides = {"session_dir": self.session_dir} if self.session_dir else {}
        try:
            self.config = load_config(self.env, self.workspace, overrides)
        except ConfigError as exc:
            self.config_error = exc.message
            self.config = Config()
            if self.session_dir:
                self.config.session_dir = self.session_dir

    def store(self):
        from khaelor.runtime import make_store

        return make_store(self.env, self.config)


def check_python(s: Situation) -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info < MIN_PYTHON:
        return Check("fail", "python", f"{version} is older than {'.'.join(map(str, MIN_PYTHON))}",
                     "install a newer Python and reinstall khaelor with it")
    return Check("ok", "python", f"{version} ({sys.executable})")


def check_dependencies(s: Situation) -> Check:
    from importlib import metadata

    try:
        requirements = metadata.requires("khaelor") or []
    except metadata.PackageNotFoundError:
        return Check("warn", "dependencies", "khaelor is not installed as a package, so its requirements are unknown",
                     "pip install -e . in the checkout")
    found, missing = [], []
    for requirement in requirements:
        if ";" in requirement:
            continue
        name = requirement.replace(" ", "").split("[")[0]
        name = next((name.split(op)[0] for op in (">=", "==", "~=", "<", ">", "!=") if op in name), name)
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            missing.append(requirement)
    if missing:
        return Check("fail", "dependencies", "missing: " + ", ".join(missing), "pip install khaelor (or pip install -e .)")
    return Check("ok", "dependencies", ", ".join(found))


def check_credentials(s: Situation) -> Check:
    present = [name for name in CREDENTIALS if s.env.environ.get(name, "").strip()]
    if not present:
        return Check("fail", "credentials", "neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set",
                     "export ANTHROPIC_API_KEY=… in your shell profile")
    return Check("ok", "credentials", f"{present[0]} is set (value not shown)")


def check_config(s: Situation) -> Check:
    if s.config_error:
        return Check("fail", "config", s.config_error, "correct the file at the line named (or move it aside)")
    sources = [str(path) for path in s.config.sources]
    return Check("ok", "config", ("parsed " + ", ".join(sources)) if sources else "no config files; using defaults")


def check_permissions(s: Situation) -> Check:
    root = s.store().root
    if not root.exists():
        return Check("ok", "store", f"{root} does not exist yet (created owner-private on first use)")
    loose = [path for path in _walk(root) if _loose(path)]
    if loose:
        shown = ", ".join(str(path) for path in loose[:SHOWN]) + (f" and {len(loose) - SHOWN} more" if len(loose) > SHOWN else "")
        return Check("fail", "store", f"{len(loose)} path(s) readable or writable by others: {shown}",
                     f"chmod -R go-rwx {root}")
    return Check("ok", "store", f"{root} is owner-private (folders 0700, files 0600)")


def check_catalog(s: Situation) -> Check:
    from khaelor.catalog import health

    status, detail = health(s.store().root)
    return Check(status, "catalog", detail, "khaelor sessions list --all-workspaces (or delete the .catalog folder)")


def check_logs(s: Situation) -> Check:
    from khaelor.journal import read_log

    logs = s.store().all_sessions()
    torn, damaged = [], []
    for log in logs:
        try:
            if read_log(log).torn_offset is not None:
                torn.append(log.stem)
        except JournalError as exc:
            damaged.append(exc.message)
    if damaged:
        return Check("fail", "logs", f"{len(damaged)} of {len(logs)} damaged: " + "; ".join(damaged[:SHOWN]),
                     "khaelor sessions inspect ID shows what is readable; the damaged records are never rewritten")
    if torn:
        return Check("warn", "logs", f"{len(torn)} of {len(logs)} end with an interrupted append: " + ", ".join(torn[:SHOWN]),
                     f"khaelor sessions repair {torn[0]} (resuming a session also removes it)")
    return Check("ok", "logs", f"{len(logs)} session log(s) read cleanly")


def check_artifacts(s: Situation) -> Check:
    from khaelor.artifacts import size_text, survey

    cap = s.config.tool_output.cap_total
    found = survey(s.env.home)
    usage = f"{size_text(found.total)} in {len(found.sessions)} session(s)"
    if found.problems:
        more = f" and {len(found.problems) - 1} more" if len(found.problems) > 1 else ""
        return Check("warn", "artifacts", f"{usage}; {found.problems[0]}{more}",
                     "chmod -R u+rwX the folder named (it is yours), or remove it")
    if found.total > cap:
        return Check("warn", "artifacts", f"{usage}, over the {cap:,} byte cap (tool_output.cap_total)",
                     "khaelor sessions gc removes the least recently used sessions' artifacts "
                     "(a session start also does, at most once a day), or raise tool_output.cap_total")
    return Check("ok", "artifacts", f"{usage}, within the {cap:,} byte cap in all")


def check_git(s: Situation) -> Check:
    git = shutil.which("git", path=s.env.environ.get("PATH"))
    if not git:
        return Check("warn", "git", "git is not on PATH, so session diffs and git facts are unavailable", "install git")
    try:
        done = subprocess.run([git, "--version"], capture_output=True, text=True, timeout=10, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("warn", "git", f"{git} did not run: {exc}", "reinstall git")
    return Check("ok", "git", done.stdout.strip() or git)


CHECKS = (check_python, check_dependencies, check_credentials, check_config, check_permissions, check_catalog,
          check_logs, check_artifacts, check_git)


def _walk(root: Path):
    yield root
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            yield Path(folder) / name


def _loose(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return not stat.S_ISLNK(mode) and bool(mode & 0o077)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, env: Env, **kwargs):
        super().__init__(*args, **kwargs)
        self.env = env

    def error(self, message: str):
        raise UsageError(message, hint="khaelor doctor --help")

    def _print_message(self, message: str, file=None) -> None:
        if message:
            (self.env.stderr if file is sys.stderr else self.env.stdout).write(message)


def main(argv: list[str], env: Env) -> int:
    """Run `khaelor doctor ARGV`: one line per check; exit 1 if any failed."""
    from khaelor.runtime import workspace_of

    parser = _Parser(prog="khaelor doctor", description="Check the installation, credentials, config and session store.",
                     env=env)
    parser.add_argument("--session-dir", metavar="PATH", help="session store root (default ~/.khaelor/sessions)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    situation = Situation(env, workspace_of(env), args.session_dir)
    situation.load()
    results = [check(situation) for check in CHECKS]
    for result in results:
        env.stdout.write(result.line() + "\n")
    env.stdout.flush()
    return int(ExitStatus.ERROR if any(result.status == "fail" for result in results) else ExitStatus.SUCCESS)
