"""pi coding-agent sessions read as KHAELOR records (for `import`, SPEC §12).

A pi session is JSONL: a `session` header (format version 3; 1 and 2 are
migrated here in memory, never on disk), then tree entries linked by
`parentId`. There is no head record: the active leaf is the last entry in the
file. Every entry becomes one KHAELOR entry with the same place in the tree,
so branches and the selected branch survive:

* `message` entries: user text and images; assistant text, `toolCall` blocks
  (as `tool_use`) and thinking (kept only when it carries an Anthropic
  signature); each `toolResult` message as a `tool_results` entry (replay
  merges consecutive ones into one turn); `bashExecution` and custom messages
  as user text, the way pi puts them into context; errored or aborted replies
  as entries without a message (pi leaves them out of context too);
* `compaction` as a KHAELOR compaction entry (its `boundary` is pi's first
  kept entry, so the context is rebuilt the way pi rebuilds it) and
  `branch_summary` as a user message, with pi's file lists kept; `model_change` of an Anthropic model as
  a KHAELOR model change;
* `thinking_level_change`, `label`, `session_info`, `custom` and `usage` as
  inert entries (no message): kept for the record, never in context;
* unknown entry types (newer pi versions) are left out and counted, their
  children re-attached to the nearest kept ancestor. `context_edit` is
  refused: it changes past context in a way KHAELOR cannot represent.
"""

import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from khaelor.errors import KhaelorError
from khaelor.journal import VERSION, timestamp

PI_VERSION = 3
PI_FORMAT = "pi-session"
COMPACTED = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{}\n</summary>"
BRANCHED = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n{}\n</summary>"
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}
INERT = {"thinking_level_change": "thinking_level", "label": "label", "session_info": "session_info",
         "custom": "pi_custom", "usage": "pi_usage"}
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOOL_ID = re.compile(r"[^A-Za-z0-9_-]")


class PiSessionError(KhaelorError):
    """A pi session that cannot be imported faithfully; the message names the line."""


@dataclass
class PiConversion:
    """A pi session as KHAELOR records (entries and a final head), plus what the import should say."""

    session_id: str
    version: int
    cwd: str | None
    records: list[dict]
    model: str = ""
    name: str | None = None
    notes: list[str] = field(default_factory=list)


def convert_pi(source: Path, numbered: list[tuple[int, dict]], clock: Callable[[], float] = time.time) -> PiConversion:
    """Convert the parsed lines of a pi session; raises PiSessionError for what cannot be carried over."""
    header = numbered[0][1]
    version = header.get("version", 1)
    if not isinstance(header.get("id"), str) or not isinstance(version, int) or not 1 <= version <= PI_VERSION:
        raise PiSessionError(f"{source} line 1: not a pi session header of format version 1 to {PI_VERSION} "
                             f"(version {version!r})")
    entries = _migrate(numbered[1:], version)
    converter = _Converter(source, clock)
    for number, entry in entries:
        converter.add(number, entry)
    head = converter.resolve(entries[-1][1].get("id")) if entries else None
    converter.records.append({"type": "head", "v": VERSION, "ts": timestamp(clock), "entry": head})
    return PiConversion(header["id"], version, header.get("cwd") if isinstance(header.get("cwd"), str) else None,
                        converter.records, converter.model, converter.name, converter.notes())


def _migrate(entries: list[tuple[int, dict]], version: int) -> list[tuple[int, dict]]:
    """Version 1 (a list without ids) and 2 (`hookMessage`) in the shape of version 3, as pi migrates them."""
    if version == 1:
        chained, previous = [], None
        for index, (number, entry) in enumerate(entries):
            entry = {**entry, "id": entry.get("id") or f"v1-{index:06d}", "parentId": previous}
            if entry.get("type") == "compaction" and isinstance(entry.get("firstKeptEntryIndex"), int):
                kept = entry["firstKeptEntryIndex"] - 1
                entry["firstKeptEntryId"] = f"v1-{kept:06d}" if 0 <= kept < len(entries) else None
            chained.append((number, entry))
            previous = entry["id"]
        entries = chained
    if version < 3:
        entries = [(number, _rename_hook(entry)) for number, entry in entries]
    return entries


def _rename_hook(entry: dict) -> dict:
    message = entry.get("message")
    if entry.get("type") == "message" and isinstance(message, dict) and message.get("role") == "hookMessage":
        return {**entry, "message": {**message, "role": "custom"}}
    return entry


class _Converter:
    """Maps pi entries to KHAELOR entry records, in file order."""

    def __init__(self, source: Path, clock: Callable[[], float]):
        self.source = source
        self.clock = clock
        self.records: list[dict] = []
        self.ids: dict[str, str] = {}
        self.skipped: dict[str, str | None] = {}
        self.skipped_types: dict[str, int] = {}
        self.dropped_thinking = 0
        self.rooted = 0
        self.model = ""
        self.name: str | None = None

    def resolve(self, pi_id) -> str | None:
        """The KHAELOR id standing for a pi entry id (a left-out entry stands for its nearest kept ancestor)."""
        seen = set()
        while pi_id in self.skipped and pi_id not in seen:
            seen.add(pi_id)
            pi_id = self.skipped[pi_id]
        return self.ids.get(pi_id)

    def add(self, number: int, entry: dict) -> None:
        where = f"{self.source} line {number}"
        pi_id, parent_id = entry.get("id"), entry.get("parentId")
        if not isinstance(pi_id, str) or not (parent_id is None or isinstance(parent_id, str)):
            raise PiSessionError(f"{where}: entry without a string id and parentId")
        kind = entry["type"]
        if kind == "context_edit":
            raise PiSessionError(f"{where}: pi context_edit entries rewrite earlier context, which KHAELOR cannot "
                                 "represent faithfully")
        converted = self._convert(where, entry)
        if converted is None:
            self.skipped[pi_id] = parent_id
            self.skipped_types[kind] = self.skipped_types.get(kind, 0) + 1
            return
        parent = self.resolve(parent_id) if parent_id is not None else None
        if parent_id is not None and parent is None:
            self.rooted += 1
        new_id = self._new_id(pi_id)
        stamp = entry.get("timestamp") if isinstance(entry.get("timestamp"), str) else timestamp(self.clock)
        self.records.append({"type": "entry", "v": VERSION, "ts": stamp, "id": new_id, "parent": parent,
                             **converted, "pi_id": pi_id})

    def _new_id(self, pi_id: str) -> str:
        new_id = pi_id if _ID.fullmatch(pi_id) else "p" + hashlib.sha256(pi_id.encode()).hexdigest()[:12]
        while new_id in self.ids.values():
            new_id = "p" + hashlib.sha256(new_id.encode()).hexdigest()[:12]
        self.ids[pi_id] = new_id
        return new_id

    def _convert(self, where: str, entry: dict) -> dict | None:
        """The KHAELOR fields (kind, message, details) of one pi entry; None to leave it out."""
        kind = entry["type"]
        if kind == "message":
            return self._message(where, entry.get("message"))
        if kind == "model_change":
            if entry.get("provider") == "anthropic" and isinstance(entry.get("modelId"), str):
                self.model = entry["modelId"]
                return {"kind": "model", "message": None, "model": entry["modelId"]}
            return {"kind": "pi_model_change", "message": None, "provider": entry.get("provider"),
                    "model_id": entry.get("modelId")}
        if kind == "compaction":
            details = entry.get("details") if isinstance(entry.get("details"), dict) else {}
            return {"kind": "compaction", "message": _user_text(COMPACTED.format(entry.get("summary", ""))),
                    "summary": entry.get("summary"), "boundary": self.resolve(entry.get("firstKeptEntryId")),
                    "tokens_before": entry.get("tokensBefore"), "read_files": details.get("readFiles", []),
                    "modified_files": details.get("modifiedFiles", [])}
        if kind == "branch_summary":
            return {"kind": "branch_summary", "message": _user_text(BRANCHED.format(entry.get("summary", "")))}
        if kind == "custom_message":
            return {"kind": "custom_message", "message": _user_message(where, entry.get("content"))}
        if kind in INERT:
            if kind == "session_info":
                self.name = entry.get("name") or None
            if kind == "label":
                entry = {**entry, "targetId": self.resolve(entry.get("targetId"))}
            details = {k: v for k, v in entry.items() if k not in ("type", "id", "parentId", "timestamp")}
            return {"kind": INERT[kind], "message": None, "pi": details}
        return None

    def _message(self, where: str, message) -> dict:
        if not isinstance(message, dict):
            raise PiSessionError(f"{where}: message entry without a message object")
        role = message.get("role")
        if role == "user":
            return {"kind": "user", "message": _user_message(where, message.get("content"))}
        if role == "assistant":
            return self._assistant(where, message)
        if role == "toolResult":
            block = {"type": "tool_result", "tool_use_id": _tool_id(message.get("toolCallId")),
                     "content": _result_content(where, message.get("content"))}
            if message.get("isError"):
                block["is_error"] = True
            return {"kind": "tool_results", "message": {"role": "user", "content": [block]}}
        if role == "bashExecution":
            text = f"Ran `{message.get('command', '')}`\n```\n{message.get('output', '')}\n```"
            if message.get("excludeFromContext"):
                return {"kind": "bash_execution", "message": None, "command": message.get("command")}
            return {"kind": "bash_execution", "message": _user_text(text)}
        if role == "custom":
            return {"kind": "custom_message", "message": _user_message(where, message.get("content"))}
        if role == "system":
            return {"kind": "pi_system", "message": None}
        raise PiSessionError(f"{where}: message role {role!r} is not supported")

    def _assistant(self, where: str, message: dict) -> dict:
        details = {"model": message.get("model"), "provider": message.get("provider"), "usage": message.get("usage"),
                   "stop_reason": STOP_REASONS.get(message.get("stopReason"), message.get("stopReason"))}
        if message.get("stopReason") in ("error", "aborted"):
            return {"kind": "assistant_error", "message": None, "error": message.get("errorMessage"), **details}
        anthropic = message.get("api") == "anthropic-messages"
        blocks = [b for b in (self._assistant_block(where, raw, anthropic) for raw in message.get("content") or [])
                  if b is not None]
        if not blocks:
            return {"kind": "assistant_empty", "message": None, **details}
        return {"kind": "assistant", "message": {"role": "assistant", "content": blocks}, **details}

    def _assistant_block(self, where: str, raw, anthropic: bool) -> dict | None:
        kind = raw.get("type") if isinstance(raw, dict) else None
        if kind == "text":
            return {"type": "text", "text": str(raw.get("text", ""))}
        if kind == "toolCall":
            arguments = raw.get("arguments")
            return {"type": "tool_use", "id": _tool_id(raw.get("id")), "name": str(raw.get("name", "")),
                    "input": arguments if isinstance(arguments, dict) else {}}
        if kind == "thinking":
            signature = raw.get("thinkingSignature")
            if not (anthropic and isinstance(signature, str) and signature):
                self.dropped_thinking += 1
                return None
            if raw.get("redacted"):
                return {"type": "redacted_thinking", "data": signature}
            return {"type": "thinking", "thinking": str(raw.get("thinking", "")), "signature": signature}
        raise PiSessionError(f"{where}: assistant content block {kind!r} is not supported")

    def notes(self) -> list[str]:
        notes = []
        if self.skipped_types:
            kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self.skipped_types.items()))
            notes.append(f"pi entries of unknown types were left out: {kinds}")
        if self.dropped_thinking:
            notes.append(f"{self.dropped_thinking} thinking block(s) of other providers were left out")
        if self.rooted:
            notes.append(f"{self.rooted} entr{'y' if self.rooted == 1 else 'ies'} whose parent is missing became roots")
        return notes


def _tool_id(raw) -> str:
    """A tool call id the Messages API accepts (pi ids may hold `|`)."""
    return _TOOL_ID.sub("_", str(raw or "")) or "call"


def _user_text(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _user_message(where: str, content) -> dict:
    return {"role": "user", "content": _blocks(where, content)}


def _blocks(where: str, content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise PiSessionError(f"{where}: message content is neither text nor a list of blocks")
    return [_block(where, block) for block in content]


def _block(where: str, block) -> dict:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "image" and isinstance(block.get("data"), str):
        return {"type": "image", "source": {"type": "base64", "media_type": str(block.get("mimeType", "image/png")),
                                            "data": block["data"]}}
    raise PiSessionError(f"{where}: content block {kind!r} is not supported")


def _result_content(where: str, content):
    """Tool result content: one string when it is all text, else blocks."""
    blocks = _blocks(where, content)
    if all(block["type"] == "text" for block in blocks):
        return "".join(block["text"] for block in blocks)
    return blocks
