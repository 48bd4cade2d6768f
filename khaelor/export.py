"""Exporting a session to a file for someone else (SPEC §12).

Formats: `json` — a `khaelor-session-export` document, version 1, holding the
whole durable graph (every record, every branch), the selected head and the
session's metadata; `jsonl` — the native log, record for record; `html` — one
self-contained, script-free page, rendered by `khaelor.htmlpage`.

Invariants:

* The source log is only read, never changed, and can never be the output.
* The output is written owner-private (0600) through a private temporary file
  that is linked (or, with `force`, renamed) into place: an existing path is
  never replaced without `force`, and no reader sees a half-written file.
* Redaction (khaelor.redact) is on unless `include_secrets`; the report says
  what it replaced, by kind.
* Records that only describe this machine's bookkeeping are never exported.
* JSON output escapes every non-ASCII character, so a terminal that shows it
  (`cat`, `less`) meets no control, bidi or invisible character raw.
"""

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from khaelor import __version__, metadata
from khaelor.errors import KhaelorError, UsageError
from khaelor.journal import read_log, timestamp
from khaelor.redact import RedactionError, Redactions, redact_value
from khaelor.session import SessionState

EXPORT_FORMAT = "khaelor-session-export"
EXPORT_VERSION = 1
FORMATS = ("json", "jsonl", "html")
SUFFIXES = {"json": ".khaelor-session.json", "jsonl": ".jsonl", "html": ".html"}
PRIVATE_RECORDS = frozenset({"torn_tail_removed"})
"""Record types about local housekeeping (repair backups and their paths), never exported."""
TITLE_CHARS = 80


class ExportError(KhaelorError):
    """The export cannot be written as asked."""


@dataclass
class Snapshot:
    """An export rendered in memory, not yet written."""

    session_id: str
    format: str
    data: bytes
    redacted: bool
    redactions: Redactions = field(default_factory=Redactions)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class ExportReport:
    """What `export_session` wrote."""

    path: Path
    session_id: str
    format: str
    size: int
    sha256: str
    redacted: bool
    redactions: Redactions

    def lines(self) -> list[str]:
        """What to tell the person: where it went and what redaction did."""
        done = f"exported session {self.session_id} to {self.path} ({self.format}, {self.size:,} bytes)"
        if not self.redacted:
            return [done, "redaction was off (--include-secrets): the file holds raw values"]
        return [done, self.redactions.summary(), "redaction is a safety filter, not proof: review before sharing"]


def format_for_path(path: Path, default: str = "html") -> str:
    """The format an output path asks for: `.json` → json, `.jsonl` → jsonl, anything else → `default`."""
    suffix = Path(path).suffix.lower()
    return {".json": "json", ".jsonl": "jsonl"}.get(suffix, "html" if suffix in (".html", ".htm") else default)


def default_output(session_id: str, fmt: str, folder: Path) -> Path:
    """`<folder>/<session id><suffix of the format>`."""
    return Path(folder) / f"{session_id}{SUFFIXES[fmt]}"


def export_session(log: Path, output: Path, fmt: str = "json", *, force: bool = False, include_secrets: bool = False,
                   clock: Callable[[], float] = time.time) -> ExportReport:
    """Write the session at `log` to `output` in `fmt`; returns what was written."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
    output = Path(output)
    if output.exists() and output.resolve() == Path(log).resolve():
        raise ExportError(f"refusing to export onto the session log itself ({output})")
    taken = snapshot(log, fmt, include_secrets=include_secrets, clock=clock)
    write_private(output, taken.data, force)
    return ExportReport(output, taken.session_id, fmt, len(taken.data), taken.sha256, taken.redacted, taken.redactions)


def snapshot(log: Path, fmt: str, *, include_secrets: bool = False,
             clock: Callable[[], float] = time.time) -> Snapshot:
    """The session at `log` rendered as `fmt`, redacted unless `include_secrets`."""
    records = [record for record in read_log(Path(log)).records if record["type"] not in PRIVATE_RECORDS]
    found = Redactions()
    if not include_secrets:
        try:
            records = redact_value(records, found)
        except RedactionError as exc:
            raise ExportError(f"cannot redact {log}: {exc}") from None
    state = SessionState.from_records(records)
    session_id = str(state.header.get("session_id", Path(log).stem))
    info = session_metadata(Path(log), state, records)
    if fmt == "json":
        data = _json_document(records, state, info, found, not include_secrets, clock)
    elif fmt == "jsonl":
        data = b"".join(_json_line(record) + b"\n" for record in records)
    else:
        from khaelor.htmlpage import render_html

        data = render_html(records, state, info, found if not include_secrets else None)
    return Snapshot(session_id, fmt, data, not include_secrets, found)


def session_metadata(log: Path, state: SessionState, records: list[dict]) -> dict:
    """Public facts about a session: title, name, tags, times, model, workspace, graph size."""
    names = metadata.load(log)
    leaves = [entry_id for entry_id in state.entries
              if not any(e.get("parent") == entry_id for e in state.entries.values())]
    return {"title": title_of(state), "name": names["name"], "tags": names["tags"],
            "created": state.header.get("created"), "updated": records[-1].get("ts"), "model": state.model,
            "workspace": state.header.get("workspace"), "entries": len(state.entries), "leaves": len(leaves)}


def title_of(state: SessionState) -> str:
    """The first line of the first request, shortened; `untitled` when there is none."""
    for entry in state.entries.values():
        message = entry.get("message") or {}
        if entry.get("kind") == "user" and message.get("role") == "user":
            text = " ".join(_texts(message.get("content"))).strip()
            line = text.splitlines()[0] if text else ""
            if line:
                return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1] + "…"
    return "untitled"


def _texts(content) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [block.get("text", "") for block in content or [] if isinstance(block, dict) and block.get("type") == "text"]


def _json_line(value) -> bytes:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _json_document(records: list[dict], state: SessionState, info: dict, found: Redactions, redacted: bool,
                   clock: Callable[[], float]) -> bytes:
    """The export document; one record per line inside `records`, so it reads well in a pager."""
    top = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "exported_at": timestamp(clock),
           "khaelor_version": __version__, "session_id": state.header.get("session_id"), "metadata": info,
           "head": state.head, "redaction": {"applied": redacted, "replaced": found.total, "by_kind": found.by_kind()}}
    opening = json.dumps(top, ensure_ascii=True, indent=1)[:-2].encode("ascii")
    body = b",\n".join(_json_line(record) for record in records)
    return opening + b',\n "records": [\n' + body + b"\n ]\n}\n"


def write_private(path: Path, data: bytes, force: bool) -> None:
    """Create `path` (0600) holding `data`; an existing path is an error unless `force`."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"{path} is a directory; give a file path")
    if path.exists() and not force:
        raise ExportError(f"{path} already exists; use --force to replace it")
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileNotFoundError:
        raise ExportError(f"the folder of {path} does not exist") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        _publish(staging, path, force)
    finally:
        staging.unlink(missing_ok=True)


def _publish(staging: Path, path: Path, force: bool) -> None:
    if force:
        os.replace(staging, path)
        return
    try:
        os.link(staging, path)
    except FileExistsError:
        raise ExportError(f"{path} already exists; use --force to replace it") from None
