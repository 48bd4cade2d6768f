"""Branches of one session: the tree of entries, moving the head, branch summaries, fork and clone (SPEC §10).

A session's entries form a tree by their `parent` links; the `head` selects
one path from a root, the active branch. Nothing here rewrites a log: moving
the head is a new `head` record, a summary of the branch left behind is a new
entry, and `fork`/`clone` write a new log whose header names its parent.

`tree()` and `plan_move()` are pure (a `SessionState` in, plain data out), so
the REPL's `/tree` and the tests share them without a terminal.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from khaelor import __version__
from khaelor.errors import UsageError
from khaelor.journal import FORMAT, VERSION, read_log, timestamp, write_new_log
from khaelor.output import sanitize
from khaelor.session import SessionState
from khaelor.store import Store, new_session_id

LABEL_WIDTH = 72
MAX_INDENT = 8
SPAN_BLOCK_CHARS = 2_000
SPAN_TOTAL_CHARS = 60_000

SUMMARY_INSTRUCTION = """\
The person is leaving the branch of the conversation shown above and going back to an earlier point. \
Summarize that abandoned branch for the conversation that continues without it: what was tried, what \
was found or changed (files, commands, results, exact error texts), and what was decided or left open. \
Be brief and concrete. Reply with the summary only."""

SUMMARY_PREFIX = "[Summary of a branch of this conversation that was left; not the person's words]\n"


@dataclass(frozen=True)
class Node:
    """One entry as `/tree` shows it."""

    entry_id: str
    depth: int
    fork: bool
    """The entry starts one of several children of its parent (or one of several roots)."""
    label: str
    on_branch: bool
    is_head: bool
    is_leaf: bool

    def text(self) -> str:
        indent = "  " * min(self.depth, MAX_INDENT)
        mark = "● " if self.is_head else "├ " if self.fork else "  "
        tail = "   ← head" if self.is_head else "" if self.on_branch or not self.is_leaf else "   (abandoned)"
        return f"{indent}{mark}{self.label}{tail}"


@dataclass(frozen=True)
class Move:
    """Where the head goes for a chosen entry, what text goes back to the input, and what is left behind."""

    target: str | None
    draft: str | None
    abandoned: list[dict]


def tree(state: SessionState) -> list[Node]:
    """Every entry in depth-first order (log order among siblings), indented one step at each fork."""
    children: dict[str | None, list[str]] = {}
    for entry_id, entry in state.entries.items():
        parent = entry.get("parent")
        children.setdefault(parent if parent in state.entries else None, []).append(entry_id)
    branch = {entry["id"] for entry in state.branch()}
    nodes: list[Node] = []
    roots = children.get(None, [])
    stack = [(entry_id, 0, len(roots) > 1) for entry_id in reversed(roots)]
    while stack:
        entry_id, depth, fork = stack.pop()
        below = children.get(entry_id, [])
        nodes.append(Node(entry_id, depth, fork, label(state.entries[entry_id]), entry_id in branch,
                          entry_id == state.head, not below))
        step = 1 if len(below) > 1 else 0
        stack.extend((child, depth + step, step == 1) for child in reversed(below))
    return nodes


def label(entry: dict) -> str:
    """One line saying what an entry is."""
    kind = entry.get("kind")
    message = entry.get("message") or {}
    if kind == "user":
        text = f"you: {_text_of(message)}"
    elif kind == "assistant":
        calls = [b.get("name", "?") for b in _blocks(message) if b.get("type") == "tool_use"]
        said = _text_of(message)
        text = f"claude: {said}" if said else "claude:"
        if calls:
            text += f" [{', '.join(calls)}]"
    elif kind == "tool_results":
        count = sum(1 for b in _blocks(message) if b.get("type") == "tool_result")
        text = f"↳ {count} tool result{'s' if count != 1 else ''}"
    elif kind == "compaction":
        text = "checkpoint (compaction)"
    elif kind == "branch_summary":
        text = f"summary of a left branch: {_text_of(message)[len(SUMMARY_PREFIX):]}"
    elif kind == "model":
        text = f"model → {entry.get('model')}"
    else:
        text = str(kind)
    text = " ".join(sanitize(text).split())
    return text if len(text) <= LABEL_WIDTH else text[:LABEL_WIDTH - 1] + "…"


def plan_move(state: SessionState, entry_id: str) -> Move:
    """The head move choosing `entry_id` means; UsageError when it cannot be chosen.

    Choosing a request of the person's goes back to just before it and hands
    its text back for editing, instead of sending it again. A reply that asked
    for tools cannot be the head (its calls would have no results); its
    results entry can.
    """
    entry = state.entries.get(entry_id)
    if entry is None:
        raise UsageError(f"no entry {entry_id!r} in this session")
    target, draft = entry_id, None
    if entry.get("kind") == "user":
        target, draft = entry.get("parent"), _text_of(entry.get("message") or {}, limit=None)
    elif any(b.get("type") == "tool_use" for b in _blocks(entry.get("message") or {})):
        raise UsageError("that reply asked for tool calls; choose the tool results after it, or the request before it")
    if target == state.head and draft is None:
        raise UsageError("the head is already there")
    return Move(target, draft, abandoned_span(state, target))


def abandoned_span(state: SessionState, target: str | None) -> list[dict]:
    """Entries of the active branch that moving the head to `target` leaves: below the common ancestor."""
    kept = set(_path(state, target))
    return [entry for entry in state.branch() if entry["id"] not in kept]


def _path(state: SessionState, entry_id: str | None) -> list[str]:
    path, seen = [], set()
    while entry_id is not None and entry_id in state.entries and entry_id not in seen:
        seen.add(entry_id)
        path.append(entry_id)
        entry_id = state.entries[entry_id].get("parent")
    return path


def summary_request(span: list[dict], instructions: str) -> list[dict]:
    """One user message: the abandoned span as a bounded transcript, then what to write.

    A transcript rather than the raw messages, because the span may begin
    with tool results whose calls lie above it, which the API would refuse.
    """
    parts, used = [], 0
    for entry in reversed(span):
        piece = _transcript(entry)
        if not piece:
            continue
        if used + len(piece) > SPAN_TOTAL_CHARS:
            parts.append("[… earlier parts of the branch left out]")
            break
        parts.append(piece)
        used += len(piece)
    ask = SUMMARY_INSTRUCTION + (f"\n\nThe person adds: {instructions}" if instructions else "")
    body = "<abandoned-branch>\n" + "\n\n".join(reversed(parts)) + "\n</abandoned-branch>\n\n" + ask
    return [{"role": "user", "content": [{"type": "text", "text": body}]}]


def summary_message(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": SUMMARY_PREFIX + text.strip()}]}


def _transcript(entry: dict) -> str:
    message = entry.get("message") or {}
    role = "person" if entry.get("kind") == "user" else message.get("role", "")
    lines = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "text":
            lines.append(_cut(block.get("text", "")))
        elif kind == "tool_use":
            lines.append(f"[tool call {block.get('name')}: {_cut(str(block.get('input')))}]")
        elif kind == "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                content = " ".join(b.get("text", "") for b in content if isinstance(b, dict))
            error = " (error)" if block.get("is_error") else ""
            lines.append(f"[tool result{error}: {_cut(str(content))}]")
    return f"{role}: " + "\n".join(lines) if lines else ""


def _cut(text: str) -> str:
    return text if len(text) <= SPAN_BLOCK_CHARS else text[:SPAN_BLOCK_CHARS] + f" […{len(text) - SPAN_BLOCK_CHARS} more]"


def _blocks(message: dict) -> list[dict]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or () if isinstance(b, dict)]


def _text_of(message: dict, limit: int | None = LABEL_WIDTH * 2) -> str:
    text = "\n".join(b.get("text", "") for b in _blocks(message) if b.get("type") == "text").strip()
    return text if limit is None else " ".join(text.split())[:limit]


# --- new sessions from an existing one -----------------------------------------


def fork(store: Store, source: Path, workspace: Path, clock: Callable[[], float]) -> Path:
    """A new session in `workspace` whose conversation is the source's active branch, up to its head."""
    state = _replay(source)
    branch = state.branch()
    if not branch:
        raise UsageError(f"session {source.stem} has no conversation on its active branch to fork")
    return _write(store, source, state, workspace, clock, "fork", branch)


def clone(store: Store, source: Path, workspace: Path, clock: Callable[[], float]) -> Path:
    """A new session in `workspace` with the source's whole entry graph, the same head selected."""
    state = _replay(source)
    if not state.entries:
        raise UsageError(f"session {source.stem} has no conversation to clone")
    return _write(store, source, state, workspace, clock, "clone", list(state.entries.values()))


def _replay(source: Path) -> SessionState:
    return SessionState.from_records(read_log(source).records)


def _write(store: Store, source: Path, state: SessionState, workspace: Path, clock: Callable[[], float],
           how: str, entries: list[dict]) -> Path:
    """Write the new log in one go (it appears whole or not at all); the header names the parent."""
    session_id = new_session_id(clock)
    origin = state.header
    now = timestamp(clock)
    header = {"type": "header", "v": VERSION, "ts": now, "format": FORMAT, "version": VERSION,
              "session_id": session_id, "workspace": str(workspace), "created": now,
              "parent_session": origin.get("session_id"),
              "branched_from": {"how": how, "session_id": origin.get("session_id"), "head": state.head},
              "model": state.model or origin.get("model"), "khaelor_version": __version__,
              "environment": origin.get("environment"), "system": origin.get("system")}
    records = [header, *entries]
    if how == "clone":
        records.append({"type": "head", "v": VERSION, "ts": now, "entry": state.head})
    path = store.new_log_path(workspace, session_id)
    write_new_log(path, records)
    return path
