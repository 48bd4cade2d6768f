"""Shared fixtures: a private data root for every test, the fake Messages API, CLI runners."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakeapi import FakeAPI, fake_api  # noqa: F401  (the fixture, shared)

ROOT = Path(__file__).resolve().parent.parent
TEST_KEY = "test-key-" + "0" * 8


@pytest.fixture(autouse=True)
def khaelor_home(tmp_path, monkeypatch):
    """Every test gets its own data root and no real credentials."""
    home = tmp_path / "khaelor-home"
    monkeypatch.setenv("KHAELOR_HOME", str(home))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "KHAELOR_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def workspace(tmp_path):
    """A throwaway git repository to work in."""
    path = tmp_path / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def khaelor_env(api: FakeAPI | None = None, **extra) -> dict[str, str]:
    """Environment for a KHAELOR subprocess pointed at the fake API."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.base_url
        env["ANTHROPIC_API_KEY"] = TEST_KEY
    env.update(extra)
    return env


def run_khaelor(args: list[str], cwd: Path, api: FakeAPI | None = None, input: str | None = None,
                timeout: float = 60, **extra) -> subprocess.CompletedProcess:
    """Run `python -m khaelor ARGS` to completion and capture its output."""
    return subprocess.run([sys.executable, "-m", "khaelor", *args], cwd=cwd, env=khaelor_env(api, **extra),
                          input=input if input is not None else "", capture_output=True, text=True, timeout=timeout)


def start_khaelor(args: list[str], cwd: Path, api: FakeAPI | None = None, **extra) -> subprocess.Popen:
    """Start `python -m khaelor ARGS` in the background (for kill tests)."""
    return subprocess.Popen([sys.executable, "-m", "khaelor", *args], cwd=cwd, env=khaelor_env(api, **extra),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
