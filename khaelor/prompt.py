"""The prompt KHAELOR sends: system text, tool definitions and cache breakpoints.

Prompt stability (SPEC §4) is this module's invariant. The system text is
composed once, at session start, from environment facts fixed then and the
memory files found then; it is stored in the log's header and reused
verbatim on every request and after resume. Tool definitions come in a fixed
order with deterministic text. `cache_control` goes on the last tool, on the
system block and on the last block of the two latest messages, so each
request reads the previous one's prefix from the cache.
"""

import copy
import datetime
import platform
import subprocess
from pathlib import Path
from typing import Callable

MEMORY_FILES = ("AGENTS.md", "KHAELOR.md", "CLAUDE.md")
MEMORY_FILE_LIMIT = 64 << 10
CACHE = {"type": "ephemeral"}
_UNCACHEABLE = {"thinking", "redacted_thinking"}

_INSTRUCTIONS = """\
You are KHAELOR, an autonomous software engineering agent working in a person's repository \
from their terminal. Carry the task through to the end: read before you change, make focused \
edits, run the code or the tests to check your work, and report plainly what you did and what \
you could not do.

Tools:
- read a file before you write or edit it; a file that changed on disk since you read it must \
be read again.
- edit replaces an exact string that must occur once (or set replace_all).
- bash runs a shell command in the workspace with a timeout; long output is cut and the full \
text saved to the path given.
- process runs long-lived commands (servers, watchers) in the background.
- Every call passes the person's permission rules; a denied call comes back as an error that \
says why. Do not try to get around a denial: say what you needed and why.
Never commit, push or otherwise change git history unless the person asks you to."""


def git_root(start: Path) -> Path | None:
    """The top of the git work tree containing `start`, found without running git."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def environment_facts(workspace: Path, clock: Callable[[], float], environ: dict[str, str]) -> dict:
    """Facts about the machine and workspace, fixed at session start."""
    root = git_root(workspace)
    return {
        "date": datetime.datetime.fromtimestamp(clock(), datetime.timezone.utc).date().isoformat(),
        "platform": f"{platform.system()} {platform.release()}",
        "shell": environ.get("SHELL", "/bin/sh"),
        "workspace": str(workspace),
        "git_repository": str(root) if root else None,
        "git_branch": _git_branch(workspace) if root else None,
    }


def _git_branch(workspace: Path) -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=workspace, capture_output=True,
                              text=True, timeout=5, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def memory_files(workspace: Path) -> list[tuple[Path, str]]:
    """Memory files from the git root (or the workspace) down to the workspace, bounded in size."""
    top = git_root(workspace) or workspace
    folders = [workspace, *workspace.parents]
    folders = folders[: folders.index(top) + 1] if top in folders else [workspace]
    found = []
    for folder in reversed(folders):
        for name in MEMORY_FILES:
            text = _read_memory(folder / name)
            if text is not None:
                found.append((folder / name, text))
    return found


def _read_memory(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MEMORY_FILE_LIMIT + 1)
    except OSError:
        return None
    text = data[:MEMORY_FILE_LIMIT].decode("utf-8", errors="replace")
    if len(data) > MEMORY_FILE_LIMIT:
        text += f"\n[… cut at {MEMORY_FILE_LIMIT} bytes]"
    return text


def system_text(facts: dict, memories: list[tuple[Path, str]]) -> str:
    """The system prompt of a session, deterministic in its inputs."""
    lines = [_INSTRUCTIONS, "", "Environment (as of session start):"]
    for key in sorted(facts):
        if facts[key] is not None:
            lines.append(f"- {key}: {facts[key]}")
    for path, text in memories:
        lines += ["", f"Instructions from {path}:", text.rstrip()]
    return "\n".join(lines)


def build_request(model: str, max_tokens: int, system: str, tools: list[dict], messages: list[dict]) -> dict:
    """A Messages API request body with cache breakpoints; inputs are not modified."""
    cached_tools = [dict(tool) for tool in tools]
    if cached_tools:
        cached_tools[-1]["cache_control"] = CACHE
    return {
        "model": model,
        "max_tokens": max_tokens,
        "system": [{"type": "text", "text": system, "cache_control": CACHE}],
        "tools": cached_tools,
        "messages": _mark_latest(messages, count=2),
    }


def _mark_latest(messages: list[dict], count: int) -> list[dict]:
    marked = list(messages)
    for index in range(len(marked) - 1, max(len(marked) - 1 - count, -1), -1):
        message = copy.deepcopy(marked[index])
        blocks = message["content"]
        for block in reversed(blocks):
            if block.get("type") not in _UNCACHEABLE:
                block["cache_control"] = CACHE
                break
        marked[index] = message
    return marked
