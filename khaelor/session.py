"""Session state, rebuilt by replaying the log — live and on resume alike.

`SessionState.apply(record)` is the only way state changes: a running
session applies each record right after journaling it, and resume applies
the records read from disk, so the two cannot disagree.

Owns: the entry graph and the head (the selected branch), the transcript of
that branch as Messages API messages, the model, the file state (§6), the
change history of attribution (§9), usage and usage uncertainty (§8), tool
calls and their progress, permission requests not yet answered and the rules
granted for the session (§5), background processes started and not yet seen
exiting, and whether the last run closed cleanly.
"""

import gc
import secrets
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from khaelor.changes import ChangeHistory
from khaelor.filestate import FileState
from khaelor.journal import Journal, LogContents

INDETERMINATE = (
    "Outcome indeterminate: KHAELOR stopped while this call was running, so its result was never "
    "recorded. It was not run again. Check the current state before relying on its effects."
)
NOT_RUN = "Not run: the session ended before this call was executed."
UNANSWERED = ("its permission request was never answered (the previous run ended while asking), "
              "and silence is never consent")


@dataclass
class ToolCallState:
    """What the log says about one tool call."""

    call_id: str
    name: str
    input: dict
    decision: dict | None = None
    started: bool = False
    result: dict | None = None


@dataclass
class SessionState:
    """Everything replay reconstructs from a log."""

    header: dict
    entries: dict[str, dict] = field(default_factory=dict)
    head: str | None = None
    model: str = ""
    file_state: FileState = field(default_factory=FileState)
    changes: ChangeHistory = field(default_factory=ChangeHistory)
    """What the change records say: baseline, snapshots, who touched which file (folded here, not by a second read)."""
    usage: list[dict] = field(default_factory=list)
    uncertain: list[dict] = field(default_factory=list)
    open_requests: dict[str, dict] = field(default_factory=dict)
    calls: dict[str, ToolCallState] = field(default_factory=dict)
    processes: dict[str, dict] = field(default_factory=dict)
    pending: dict[str, dict] = field(default_factory=dict)
    """Permission requests journaled and not yet answered, by call id."""
    grants: list[str] = field(default_factory=list)
    """Allow rules the person granted for this session ('this session' and 'always' answers)."""
    last_turn_usage: dict | None = None
    """Usage of the latest reply in the current context (none yet after a compaction)."""
    closed: bool = False
    records: int = 0

    @classmethod
    def from_records(cls, records: list[dict]) -> "SessionState":
        state = cls(header=records[0], model=records[0].get("model", ""))
        for record in records[1:]:
            state.apply(record)
        return state

    def apply(self, record: dict) -> None:
        """Fold one record into the state."""
        self.records += 1
        kind = record["type"]
        self.closed = kind == "close"
        handler = _HANDLERS.get(kind)
        if handler:
            handler(self, record)
        self.file_state.apply(record)
        self.changes.apply(record)

    def branch(self) -> list[dict]:
        """Entries from the root to the head of the selected branch."""
        chain, seen = [], set()
        node = self.head
        while node is not None and node not in seen:
            seen.add(node)
            entry = self.entries[node]
            chain.append(entry)
            node = entry.get("parent")
        chain.reverse()
        return chain

    def live_entries(self) -> list[dict]:
        """The entries that make up the context: after a compaction, its checkpoint, kept tail and what follows."""
        branch = self.branch()
        for index in range(len(branch) - 1, -1, -1):
            entry = branch[index]
            if entry.get("kind") == "compaction":
                ids = [e["id"] for e in branch[:index]]
                start = ids.index(entry["boundary"]) if entry.get("boundary") in ids else index
                return [entry] + branch[start:index] + branch[index + 1:]
        return branch

    def messages(self) -> list[dict]:
        """The context as API messages, consecutive same-role turns merged."""
        return merge_messages([entry["message"] for entry in self.live_entries() if entry.get("message")])

    def unanswered_calls(self) -> list[ToolCallState]:
        """Tool calls of the head assistant message that have no results entry yet."""
        entry = self.entries.get(self.head) if self.head else None
        if not entry or entry.get("kind") != "assistant":
            return []
        uses = [b for b in entry["message"]["content"] if b.get("type") == "tool_use"]
        return [self.calls.get(u["id"]) or ToolCallState(u["id"], u["name"], u.get("input", {})) for u in uses]

    def usage_totals(self) -> dict[str, int]:
        """Token totals over every usage record of the session."""
        totals = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
        for record in self.usage:
            usage = record.get("usage") or {}
            totals["input_tokens"] += usage.get("input_tokens") or 0
            totals["output_tokens"] += usage.get("output_tokens") or 0
            totals["cache_read_tokens"] += usage.get("cache_read_input_tokens") or 0
            totals["cache_write_tokens"] += usage.get("cache_creation_input_tokens") or 0
        return totals


def merge_messages(messages: list[dict]) -> list[dict]:
    """Messages with consecutive same-role turns merged into one, as the API wants them."""
    merged: list[dict] = []
    for message in messages:
        content = _as_blocks(message["content"])
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1]["content"] = merged[-1]["content"] + content
        else:
            merged.append({"role": message["role"], "content": content})
    return merged


def _as_blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _on_entry(state: SessionState, record: dict) -> None:
    state.entries[record["id"]] = record
    state.head = record["id"]
    if record.get("kind") == "model":
        state.model = record["model"]
    elif record.get("kind") == "compaction":
        state.last_turn_usage = None


def _on_head(state: SessionState, record: dict) -> None:
    if record.get("entry") in state.entries or record.get("entry") is None:
        state.head = record.get("entry")


def _on_tool_request(state: SessionState, record: dict) -> None:
    state.calls[record["call_id"]] = ToolCallState(record["call_id"], record["name"], record.get("input") or {})


def _call(state: SessionState, record: dict) -> ToolCallState | None:
    return state.calls.get(record.get("call_id"))


def _on_permission_request(state: SessionState, record: dict) -> None:
    if record.get("call_id"):
        state.pending[record["call_id"]] = record


def _on_session_rule(state: SessionState, record: dict) -> None:
    rule = str(record.get("rule", ""))
    if record.get("action") == "remove":
        state.grants = [grant for grant in state.grants if grant != rule]
    elif rule not in state.grants:
        state.grants.append(rule)


def _on_permission(state: SessionState, record: dict) -> None:
    state.pending.pop(record.get("call_id"), None)
    state.grants.extend(str(rule) for rule in record.get("grants") or ())
    if call := _call(state, record):
        call.decision = record


def _on_tool_start(state: SessionState, record: dict) -> None:
    if call := _call(state, record):
        call.started = True


def _on_tool_result(state: SessionState, record: dict) -> None:
    state.pending.pop(record.get("call_id"), None)
    if call := _call(state, record):
        call.result = record


def _on_request(state: SessionState, record: dict) -> None:
    state.open_requests[record["attempt"]] = record


def _on_request_outcome(state: SessionState, record: dict) -> None:
    state.open_requests.pop(record.get("attempt"), None)
    if record["type"] == "usage":
        state.usage.append(record)
        if record.get("operation") != "compaction":
            state.last_turn_usage = record
    elif record["type"] == "usage_uncertainty":
        state.uncertain.append(record)


def _on_process_start(state: SessionState, record: dict) -> None:
    if "id" in record:
        state.processes[record["id"]] = record


def _on_process_exit(state: SessionState, record: dict) -> None:
    state.processes.pop(record.get("id"), None)


_HANDLERS: dict[str, Callable[[SessionState, dict], None]] = {
    "entry": _on_entry,
    "head": _on_head,
    "tool_request": _on_tool_request,
    "permission_request": _on_permission_request,
    "permission": _on_permission,
    "session_rule": _on_session_rule,
    "tool_start": _on_tool_start,
    "tool_result": _on_tool_result,
    "request": _on_request,
    "usage": _on_request_outcome,
    "usage_uncertainty": _on_request_outcome,
    "request_failed": _on_request_outcome,
    "process_start": _on_process_start,
    "process_exit": _on_process_exit,
    "process_gone": _on_process_exit,
}


class Session:
    """A session open for writing: its journal plus the state the journal implies."""

    def __init__(self, journal: Journal, state: SessionState):
        self.journal = journal
        self.state = state

    @property
    def id(self) -> str:
        return self.state.header["session_id"]

    @property
    def path(self) -> Path:
        return self.journal.path

    @property
    def workspace(self) -> Path:
        return Path(self.state.header["workspace"])

    @classmethod
    def create(cls, path: Path, header: dict, clock: Callable[[], float]) -> "Session":
        journal = Journal.create(path, header, clock)
        contents = LogContents([{"type": "header", **header}], None, 0)
        return cls(journal, SessionState.from_records(contents.records))

    @classmethod
    def open(cls, path: Path, clock: Callable[[], float]) -> "Session":
        """Lock an existing log and replay it."""
        with _long_lived():
            journal, contents = Journal.open(path, clock)
            state = SessionState.from_records(contents.records)
        return cls(journal, state)

    def close(self) -> None:
        """Release the log, and hand what `open` froze back to the cyclic collector."""
        self.journal.close()
        gc.unfreeze()

    def record(self, kind: str, /, **fields) -> dict:
        """Journal a record, then fold it into the state."""
        record = self.journal.append(kind, **fields)
        self.state.apply(record)
        return record

    def add_entry(self, kind: str, message: dict | None = None, **fields) -> str:
        """Append a conversation entry as a child of the head; it becomes the head."""
        entry_id = secrets.token_hex(4)
        while entry_id in self.state.entries:
            entry_id = secrets.token_hex(4)
        self.record("entry", id=entry_id, parent=self.state.head, kind=kind, message=message, **fields)
        return entry_id

    def recover(self, reask: Callable[[ToolCallState], str] | None = None) -> list[str]:
        """Settle what a dead run left open; returns one line per thing settled.

        Requests without an outcome become usage uncertainty; processes of the
        dead run are marked gone; a permission request left unanswered is
        asked again through `reask` (which journals the answer and runs the
        call only if it is allowed), or denied without it; other unanswered
        tool calls get results that say exactly what is known — nothing is
        ever re-run.
        """
        notes = []
        for attempt, request in list(self.state.open_requests.items()):
            self.record("usage_uncertainty", attempt=attempt, model=request.get("model"),
                        operation=request.get("operation"), reason="the process ended during the request")
            notes.append(f"a model request of the previous run ended without usage ({request.get('model')}) — recorded as uncertain")
        for proc_id, proc in list(self.state.processes.items()):
            self.record("process_gone", id=proc_id, pid=proc.get("pid"), command=proc.get("command"))
            notes.append(f"background process {proc_id} ({proc.get('command')}) belonged to the previous run; "
                         "it is no longer managed and will not be restarted")
        calls = self.state.unanswered_calls()
        for call in calls:
            if call.call_id in self.state.pending:
                notes.append(reask(call) if reask else self._deny_unanswered(call))
        missing = sum(call.result is None for call in calls)
        if calls:
            self.settle_calls(calls)
        if missing:
            notes.append(f"{missing} tool call(s) of the previous run had no result; marked without re-running")
        return notes

    def _deny_unanswered(self, call: ToolCallState) -> str:
        self.record("permission", call_id=call.call_id, decision="deny", reason=UNANSWERED, rule=None,
                    source="no-answer")
        self.record("tool_result", call_id=call.call_id, is_error=True, content=f"Permission denied: {UNANSWERED}")
        return f"the permission request of the previous run for {call.name} was denied: {UNANSWERED}"

    def settle_calls(self, calls: list[ToolCallState]) -> None:
        """Write the results entry for `calls`, synthesizing what the log lacks."""
        blocks = []
        for call in calls:
            if call.result is None:
                approved = call.started or (call.decision or {}).get("decision") == "allow"
                text = INDETERMINATE if approved else NOT_RUN
                self.record("tool_result", call_id=call.call_id, is_error=True, content=text, synthetic=True)
            result = self.state.calls[call.call_id].result if call.call_id in self.state.calls else None
            result = result or {"content": NOT_RUN, "is_error": True}
            blocks.append(tool_result_block(call.call_id, result["content"], result.get("is_error", False)))
        self.add_entry("tool_results", {"role": "user", "content": blocks})


@contextmanager
def _long_lived():
    """Build what lives as long as the session (a replayed log) without the cyclic collector re-scanning it.

    A long log is millions of fresh containers, none in a cycle. Collected
    while they are parsed, they are scanned again and again; once parsed,
    every later full collection (the SDK import, each turn) scans them all
    again. So: collect what is garbage already, pause the collector while the
    log is read and replayed, then freeze the result out of later
    collections (reference counting still frees it).
    """
    if not gc.isenabled():
        yield
        return
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def tool_result_block(call_id: str, content: str, is_error: bool) -> dict:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block
