"""Importing a session from a file into a new session of this workspace (SPEC §12).

Sources: a `khaelor-session-export` JSON document, a KHAELOR JSONL log (native
or exported), or a pi coding-agent JSONL session (format version 3; versions
1 and 2 are migrated in memory, as pi itself would).

Invariants:

* The source is read once, bounded in size, and never written.
* Everything is checked before anything is written: strict UTF-8 and JSON,
  a consistent entry graph, a known format version. What cannot be carried
  over faithfully is refused with a one-line reason naming the line.
* The result is a new owner-private log with a fresh session id, written
  whole and linked into place; its header names where it came from
  (`imported_from`, and `parent_session` for a KHAELOR source) and describes
  this workspace, so `khaelor -r <id>` continues it here.
* Imported content grants nothing. Records are history: a permission
  decision stays attached to the call it decided and is never a rule for
  new calls, which are decided only by the importing person's configuration
  and flags. A tool call left without a result is given one that says it was
  never run, so nothing imported is ever executed or asked about again.
"""

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from khaelor import __version__, metadata
from khaelor.env import Env
from khaelor.errors import JournalError, KhaelorError
from khaelor.export import EXPORT_FORMAT, EXPORT_VERSION, PRIVATE_RECORDS
from khaelor.journal import FORMAT, MAX_RECORDS, VERSION, timestamp, write_new_log
from khaelor.pisession import PI_FORMAT, convert_pi
from khaelor.prompt import environment_facts, memory_files, system_text
from khaelor.session import SessionState, tool_result_block
from khaelor.store import Store, new_session_id

MAX_IMPORT_BYTES = 256 << 20
NEVER_RUN = "No result was recorded for this call before the session was imported; it was not run again."
_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ImportRefused(KhaelorError):
    """The source cannot be imported faithfully; the message says why."""


@dataclass
class ImportReport:
    """The new session an import made."""

    session_id: str
    path: Path
    source: Path
    source_format: str
    source_id: str | None
    entries: int
    head: str | None
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        origin = f"{self.source_format} session {self.source_id}" if self.source_id else self.source_format
        return [f"imported {self.source} ({origin}) as session {self.session_id}: {self.entries} entries",
                *self.notes, f"continue it with: khaelor -r {self.session_id}"]


@dataclass
class _Source:
    """A parsed source, converted to KHAELOR records (without the new header)."""

    format: str
    version: int
    session_id: str | None
    workspace: str | None
    model: str
    records: list[dict]
    notes: list[str]
    name: str | None = None
    tags: list[str] = field(default_factory=list)


def import_session(source: Path, store: Store, workspace: Path, env: Env) -> ImportReport:
    """Make a new session in `workspace` from the file at `source`; returns what was made."""
    source = Path(source)
    data = _read(source)
    parsed = _parse(source, data)
    session_id = new_session_id(env.clock)
    header = _header(parsed, session_id, source, data, workspace, env)
    records = [header, *_answer_orphans(parsed.records)]
    records += _settlement(records, env)
    state = _replay(records, source)
    path = store.new_log_path(workspace, session_id)
    try:
        write_new_log(path, records)
    except JournalError as exc:
        raise ImportRefused(exc.message) from None
    if parsed.name or parsed.tags:
        metadata.save(path, parsed.name, parsed.tags)
    return ImportReport(session_id, path, source, parsed.format, parsed.session_id, len(state.entries), state.head,
                        parsed.notes)


def _read(source: Path) -> bytes:
    try:
        with open(source, "rb") as handle:
            if not os.path.isfile(source):
                raise ImportRefused(f"{source} is not a file")
            data = handle.read(MAX_IMPORT_BYTES + 1)
    except IsADirectoryError:
        raise ImportRefused(f"{source} is not a file") from None
    except OSError as exc:
        raise ImportRefused(f"cannot read {source}: {exc.strerror}") from None
    if len(data) > MAX_IMPORT_BYTES:
        raise ImportRefused(f"{source} is larger than {MAX_IMPORT_BYTES >> 20} MiB; it cannot be imported")
    return data


def _decode(source: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportRefused(f"{source} line {line}: invalid UTF-8 at byte {exc.start}") from None


def _parse(source: Path, data: bytes) -> _Source:
    """Recognise the source's format and convert it."""
    text = _decode(source, data)
    start = text.lstrip()[:1]
    if start == "<":
        raise ImportRefused(f"{source} looks like an HTML page; HTML exports are for reading and cannot be imported")
    if start != "{":
        raise ImportRefused(f"{source} is not a KHAELOR export or log, nor a pi v3 session (JSON/JSONL expected)")
    first = _first_object(text)
    if first.get("type") == "header":
        return _khaelor_log(source, _json_lines(source, text))
    if first.get("type") == "session":
        return _pi(source, _json_lines(source, text))
    return _khaelor_export(source, text)


def _pi(source: Path, numbered: list[tuple[int, dict]]) -> _Source:
    converted = convert_pi(source, numbered)
    return _Source(PI_FORMAT, converted.version, converted.session_id, converted.cwd, converted.model,
                   converted.records, converted.notes, converted.name)


def _first_object(text: str) -> dict:
    try:
        value = json.loads(text.split("\n", 1)[0])
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _json_lines(source: Path, text: str) -> list[tuple[int, dict]]:
    """(line number, object) for each line; an incomplete final line (a torn append) is left out."""
    lines = text.split("\n")
    torn = lines.pop() if lines and lines[-1].strip() else None
    parsed = [(number, _json_line(source, number, line)) for number, line in enumerate(lines, 1) if line.strip()]
    if torn is not None:
        try:
            parsed.append((len(lines) + 1, _json_line(source, len(lines) + 1, torn)))
        except ImportRefused:
            pass
    if len(parsed) > MAX_RECORDS:
        raise ImportRefused(f"{source} has more than {MAX_RECORDS} records")
    return parsed


def _json_line(source: Path, number: int, line: str) -> dict:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportRefused(f"{source} line {number}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ImportRefused(f"{source} line {number}: JSON nested too deeply") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ImportRefused(f"{source} line {number}: not a record (an object with a string 'type')")
    return value


def _khaelor_export(source: Path, text: str) -> _Source:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportRefused(f"{source} line {exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ImportRefused(f"{source}: JSON nested too deeply") from None
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise ImportRefused(f"{source} is not a KHAELOR export or log, nor a pi v3 session")
    version = document.get("version")
    if not isinstance(version, int) or version > EXPORT_VERSION:
        raise ImportRefused(f"{source} is a {EXPORT_FORMAT} of version {version!r}; this KHAELOR reads version "
                            f"{EXPORT_VERSION}")
    records = document.get("records")
    if not isinstance(records, list) or not all(isinstance(r, dict) and isinstance(r.get("type"), str) for r in records):
        raise ImportRefused(f"{source}: 'records' must be a list of records")
    parsed = _khaelor_log(source, list(enumerate(records, 1)), what="record")
    if "head" in document and document["head"] != _replay([records[0], *parsed.records], source).head:
        raise ImportRefused(f"{source}: the export's head does not match its records")
    info = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    parsed.format, parsed.version = EXPORT_FORMAT, version
    parsed.name = info.get("name") if isinstance(info.get("name"), str) else None
    parsed.tags = [tag for tag in info.get("tags") or [] if isinstance(tag, str)]
    return parsed


def _khaelor_log(source: Path, numbered: list[tuple[int, dict]], what: str = "line") -> _Source:
    if not numbered or numbered[0][1].get("type") != "header" or numbered[0][1].get("format") != FORMAT:
        raise ImportRefused(f"{source} does not start with a KHAELOR session header")
    header = numbered[0][1]
    version = header.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ImportRefused(f"{source} was written by a newer KHAELOR (log format version {version!r})")
    kept = [(number, record) for number, record in numbered[1:] if record["type"] not in PRIVATE_RECORDS]
    _check_graph(source, kept, what)
    records = [_without_grants(record) for _, record in kept]
    dropped = sum(len(record.get("grants") or ()) for _, record in kept if record["type"] == "permission")
    notes = [f"{dropped} permission grant(s) of the source session were not carried over"] if dropped else []
    return _Source(FORMAT, version, _str(header.get("session_id")), _str(header.get("workspace")),
                   _str(header.get("model")) or "", records, notes)


def _without_grants(record: dict) -> dict:
    """A permission decision without the session rules it granted: history, not authority."""
    if record["type"] != "permission" or "grants" not in record:
        return record
    return {key: value for key, value in record.items() if key != "grants"}


def _check_graph(source: Path, numbered: list[tuple[int, dict]], what: str) -> None:
    """Entries need a unique id, a parent met earlier (or none) and a message of a known shape; heads a known entry."""
    seen: set[str] = set()
    for number, record in numbered:
        where = f"{source} {what} {number}"
        if record["type"] == "head":
            if record.get("entry") is not None and record.get("entry") not in seen:
                raise ImportRefused(f"{where}: head selects unknown entry {record.get('entry')!r}")
            continue
        if record["type"] != "entry":
            continue
        entry_id = record.get("id")
        if not isinstance(entry_id, str) or not _ENTRY_ID.fullmatch(entry_id) or entry_id in seen:
            raise ImportRefused(f"{where}: entry id {entry_id!r} is missing, malformed or repeated")
        if record.get("parent") is not None and record.get("parent") not in seen:
            raise ImportRefused(f"{where}: entry {entry_id} refers to unknown parent {record.get('parent')!r}")
        if not _message_ok(record.get("message")):
            raise ImportRefused(f"{where}: entry {entry_id} has a message of an unknown shape")
        seen.add(entry_id)


def _message_ok(message) -> bool:
    if message is None:
        return True
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    return isinstance(content, str) or (isinstance(content, list) and all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in content))


def _str(value) -> str | None:
    return value if isinstance(value, str) else None


def _header(parsed: _Source, session_id: str, source: Path, data: bytes, workspace: Path, env: Env) -> dict:
    facts = environment_facts(workspace, env.clock, env.environ)
    now = timestamp(env.clock)
    origin = {"format": parsed.format, "version": parsed.version, "session_id": parsed.session_id,
              "path": str(source.resolve()), "sha256": hashlib.sha256(data).hexdigest(), "workspace": parsed.workspace}
    return {"type": "header", "v": VERSION, "ts": now, "format": FORMAT, "version": VERSION, "session_id": session_id,
            "workspace": str(workspace), "created": now,
            "parent_session": parsed.session_id if parsed.format != PI_FORMAT else None,
            "model": parsed.model, "khaelor_version": __version__, "environment": facts,
            "system": system_text(facts, memory_files(workspace)), "imported_from": origin}


def _answer_orphans(records: list[dict]) -> list[dict]:
    """Records where every tool call followed by a new request of the person has a result first.

    The Messages API needs a result for each call before the next user turn; a source that lacks one
    (an aborted pi turn) gets results saying the call was never run, ahead of that request.
    """
    entries: dict[str, dict] = {}
    fixed = []
    for record in records:
        if record["type"] == "entry":
            record = _answered(record, pending_calls(entries, record.get("parent")))
            entries[record["id"]] = record
        fixed.append(record)
    return fixed


def _answered(entry: dict, pending: list[str]) -> dict:
    message = entry.get("message") or {}
    content = message.get("content")
    if not pending or message.get("role") != "user" or not isinstance(content, list):
        return entry
    if all(block.get("type") == "tool_result" for block in content):
        return entry
    blocks = [tool_result_block(call_id, NEVER_RUN, True) for call_id in pending]
    return {**entry, "message": {**message, "content": blocks + content}}


def _settlement(records: list[dict], env: Env) -> list[dict]:
    """Close what the source left open, so nothing imported is asked about or run: pending permission
    requests are denied, and tool calls on the selected branch without a result get one saying so."""
    state = SessionState.from_records(records)
    now = timestamp(env.clock)
    closing = [{"type": "permission", "v": VERSION, "ts": now, "call_id": call_id, "decision": "deny",
                "reason": "the session was imported; this request was not answered in its source", "rule": None,
                "source": "import"} for call_id in state.pending]
    pending = pending_calls(state.entries, state.head)
    if pending:
        blocks = [tool_result_block(call_id, NEVER_RUN, True) for call_id in pending]
        closing.append({"type": "entry", "v": VERSION, "ts": now, "id": "imp" + hashlib.sha256(
            str(state.head).encode()).hexdigest()[:8], "parent": state.head, "kind": "tool_results",
                        "message": {"role": "user", "content": blocks}, "synthetic": True})
    return closing


def pending_calls(entries: dict[str, dict], entry_id: str | None) -> list[str]:
    """Ids of the tool calls of the nearest assistant message at or above `entry_id` that have no result below it."""
    answered: set[str] = set()
    seen: set[str] = set()
    while entry_id is not None and entry_id in entries and entry_id not in seen:
        seen.add(entry_id)
        entry = entries[entry_id]
        message = entry.get("message") or {}
        blocks = message.get("content") if isinstance(message.get("content"), list) else []
        if message.get("role") == "assistant":
            return [b["id"] for b in blocks if b.get("type") == "tool_use" and b.get("id") not in answered]
        if message.get("role") == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if len(results) < len(blocks):
                return []
            answered.update(results)
        entry_id = entry.get("parent")
    return []


def _replay(records: list[dict], source: Path) -> SessionState:
    try:
        return SessionState.from_records(records)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ImportRefused(f"{source}: its records do not replay ({type(exc).__name__}: {exc})") from None
