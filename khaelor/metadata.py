"""Session names and tags, kept in a sidecar so the log is never rewritten for them.

`<workspace-dir>/.metadata/<session-id>.json` holds `{"name": ..., "tags": [...]}`,
written owner-private and atomically (temporary file, fsync, rename). The log
still journals each rename and tag change as an audit record.
"""

import json
import os
from pathlib import Path

from khaelor.journal import private_dir

MAX_SIDECAR_BYTES = 64 << 10
TITLE_SCAN_BYTES = 256 << 10
TITLE_WIDTH = 80


def sidecar(log: Path) -> Path:
    return log.parent / ".metadata" / f"{log.stem}.json"


def load(log: Path) -> dict:
    """The session's name and tags; empty when none were set or the sidecar is unreadable."""
    try:
        with open(sidecar(log), "rb") as handle:
            data = json.loads(handle.read(MAX_SIDECAR_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return {"name": None, "tags": []}
    name = data.get("name") if isinstance(data.get("name"), str) else None
    tags = [t for t in data.get("tags", []) if isinstance(t, str)] if isinstance(data.get("tags"), list) else []
    return {"name": name, "tags": tags}


def save(log: Path, name: str | None, tags: list[str]) -> None:
    """Replace the sidecar with `name` and `tags`."""
    write_private_json(sidecar(log), {"name": name, "tags": tags})


def write_private_json(path: Path, data: dict) -> None:
    """Replace `path` with `data` as JSON: owner-private, atomic (temporary file, fsync, rename)."""
    private_dir(path.parent)
    staging = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)


def title(log: Path) -> str:
    """The first request of a session, on one line — read from the head of the log only."""
    try:
        with open(log, "rb") as handle:
            head = handle.read(TITLE_SCAN_BYTES)
    except OSError:
        return ""
    for line in head.split(b"\n")[1:-1]:
        try:
            record = json.loads(line.decode("utf-8"))
        except ValueError:
            return ""
        if record.get("type") == "entry" and record.get("kind") == "user":
            return _one_line(record.get("message") or {})
    return ""


def _one_line(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    text = " ".join(str(content or "").split())
    return text if len(text) <= TITLE_WIDTH else text[: TITLE_WIDTH - 1] + "…"
