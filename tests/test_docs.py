"""One source of truth: the man page and README are checked against the parsers and the REPL's commands."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from khaelor import sessions_cli
from khaelor.cli import build_parser
from khaelor.env import Env
from khaelor.repl import Repl

ROOT = Path(__file__).resolve().parent.parent
MAN = (ROOT / "man" / "khaelor.1").read_text()
README = (ROOT / "README.md").read_text()


def man_text() -> str:
    """The man page with roff escapes for dashes undone."""
    return MAN.replace("\\-", "-")


def cli_flags() -> set[str]:
    return {flag for action in build_parser()._actions for flag in action.option_strings if flag.startswith("--")}


def slash_commands() -> set[str]:
    names = {name[3:] for name in dir(Repl) if name.startswith("do_")}
    return {name for name in names if (getattr(Repl, f"do_{name}").__doc__ or "").startswith(f"/{name}")}


def session_commands() -> set[str]:
    return {command.name for command in sessions_cli.COMMANDS}


@pytest.mark.parametrize("flag", sorted(cli_flags()))
def test_every_flag_is_in_the_man_page(flag):
    assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", man_text()), f"{flag} is not documented in man/khaelor.1"


def test_the_man_page_names_no_flag_that_does_not_exist():
    documented = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", man_text()))
    sessions_flags = {flag for command in sessions_cli.COMMANDS for flag in _subcommand_flags(command.name)}
    assert documented <= cli_flags() | sessions_flags, documented - cli_flags() - sessions_flags


@pytest.mark.parametrize("name", sorted(slash_commands()))
def test_every_slash_command_is_in_the_man_page_and_readme(name):
    assert re.search(rf"/{name}\b", man_text()), f"/{name} is not in man/khaelor.1"
    assert f"`/{name}" in README, f"/{name} is not in README.md"


@pytest.mark.parametrize("name", sorted(session_commands()))
def test_every_sessions_subcommand_is_documented(name):
    assert re.search(rf"sessions {name}\b", man_text()), f"'khaelor sessions {name}' is not in man/khaelor.1"
    assert f"sessions {name}" in README, f"'khaelor sessions {name}' is not in README.md"


def test_help_mentions_every_subcommand():
    help_text = build_parser().format_help()
    assert "khaelor doctor" in help_text
    for name in session_commands():
        assert re.search(rf"khaelor sessions [a-z|]*\b{name}\b", help_text), name


def _subcommand_flags(name: str) -> set[str]:
    parser = sessions_cli.build_parser(Env())
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices[name]
    return {flag for action in sub._actions for flag in action.option_strings if flag.startswith("--")}


def test_sessions_subcommand_flags_are_documented():
    for name in session_commands():
        for flag in _subcommand_flags(name) - {"--help"}:
            assert flag in man_text(), f"sessions {name} {flag} is not in man/khaelor.1"


@pytest.mark.skipif(not shutil.which("groff"), reason="groff is not installed")
def test_man_page_has_no_groff_warnings():
    done = subprocess.run(["groff", "-man", "-ww", "-z", str(ROOT / "man" / "khaelor.1")], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.skipif(not shutil.which("man"), reason="man is not installed")
def test_man_renders_from_the_checkout():
    done = subprocess.run(["man", "-l", str(ROOT / "man" / "khaelor.1")], capture_output=True, text=True,
                          env={"MANPAGER": "cat", "PAGER": "cat", "MANWIDTH": "80", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and "khaelor" in done.stdout and "PERMISSIONS" in done.stdout
