"""The session catalog: a disposable SQLite index that makes listing fast (SPEC §10).

`<sessions root>/.catalog/sessions-v1.sqlite3` holds one row per log: title,
name, tags, workspace, created/updated, the active branch's message count,
model, cost in integer nano-dollars, the number of uncertain attempts, and the
fingerprint (size and mtime of the log, mtime of its sidecar) the row was
read at. The logs and sidecars stay authoritative:

* only missing or stale rows are refreshed; rows of vanished logs are dropped;
* the schema is a tuple of named, ordered migrations counted by
  `PRAGMA user_version`;
* a catalog that is locked is bypassed for this listing; one that is corrupt,
  oversized or from a newer version is deleted and rebuilt. Whatever happens
  to the catalog, `summaries()` answers from the logs — a listing never fails
  because of it.

Logs are read with `journal.read_log`, never under the journal's lock.
`sqlite3` is imported inside the functions, so importing this module is cheap.
"""

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

from khaelor import metadata
from khaelor.errors import JournalError
from khaelor.journal import private_dir, read_log

CATALOG_DIR = ".catalog"
CATALOG_FILE = "sessions-v1.sqlite3"
MAX_CATALOG_BYTES = 256 << 20
BUSY_TIMEOUT_S = 0.5

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("create sessions", """
        CREATE TABLE sessions (
            path TEXT PRIMARY KEY, folder TEXT NOT NULL, id TEXT NOT NULL, workspace TEXT, title TEXT, name TEXT,
            tags TEXT NOT NULL DEFAULT '[]', created TEXT, updated TEXT, messages INTEGER NOT NULL DEFAULT 0,
            model TEXT, cost_nanos INTEGER, cost_complete INTEGER NOT NULL DEFAULT 1,
            uncertain INTEGER NOT NULL DEFAULT 0, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
            meta_mtime_ns INTEGER NOT NULL, error TEXT)"""),
    ("index sessions by folder", "CREATE INDEX sessions_folder ON sessions (folder)"),
)
SCHEMA_VERSION = len(MIGRATIONS)
_COLUMNS = ("path", "folder", "id", "workspace", "title", "name", "tags", "created", "updated", "messages", "model",
            "cost_nanos", "cost_complete", "uncertain", "size", "mtime_ns", "meta_mtime_ns", "error")


@dataclass
class Summary:
    """What a listing shows of one session."""

    path: str
    folder: str
    id: str
    workspace: str | None = None
    title: str = ""
    name: str | None = None
    tags: list[str] = field(default_factory=list)
    created: str | None = None
    updated: str | None = None
    messages: int = 0
    model: str | None = None
    cost_nanos: int | None = None
    """Known cost in nano-dollars; None when nothing of it is priced."""
    cost_complete: bool = True
    """Whether cost_nanos is the whole cost (no uncertain attempt, every model priced)."""
    uncertain: int = 0
    size: int = 0
    mtime_ns: int = 0
    meta_mtime_ns: int = 0
    error: str | None = None
    """Why the log could not be read (a damaged completed record), if it could not."""

    def fingerprint(self) -> tuple[int, int, int]:
        return self.size, self.mtime_ns, self.meta_mtime_ns

    def as_row(self) -> tuple:
        data = asdict(self)
        data["tags"] = json.dumps(self.tags, ensure_ascii=False)
        data["cost_complete"] = int(self.cost_complete)
        return tuple(data[column] for column in _COLUMNS)

    @classmethod
    def from_row(cls, row: tuple) -> "Summary":
        summary = cls(*row)  # _COLUMNS are the fields, in order
        tags = summary.tags
        summary.tags = json.loads(tags) if tags and tags != "[]" else []
        summary.cost_complete = bool(summary.cost_complete)
        return summary


@dataclass
class Listing:
    """Summaries of the requested logs, and how the catalog fared (for `doctor` and tests)."""

    sessions: list[Summary]
    catalog: str
    """'used' (read and refreshed), 'rebuilt' (replaced, with the reason) or 'bypassed' (with the reason)."""
    refreshed: int = 0


def catalog_path(sessions_root: Path) -> Path:
    return sessions_root / CATALOG_DIR / CATALOG_FILE


def fingerprint(log: Path) -> tuple[int, int, int] | None:
    """(size, mtime_ns) of the log and mtime_ns of its sidecar (0 without one); None if the log is gone."""
    text = os.fspath(log)
    try:
        stat = os.stat(text)
    except OSError:
        return None
    folder, name = os.path.split(text)
    try:
        # metadata.sidecar(log), as plain strings: pathlib costs more than the stat itself over thousands of logs.
        meta = os.stat(os.path.join(folder, ".metadata", name[:-len(".jsonl")] + ".json")).st_mtime_ns
    except OSError:
        meta = 0
    return stat.st_size, stat.st_mtime_ns, meta


def fingerprints(logs: list[Path]) -> list[tuple[int, int, int] | None]:
    """`fingerprint` of each log, listing each folder's `.metadata/` once instead of a stat per sidecar."""
    sidecars: dict[str, dict[str, int]] = {}
    stamps = []
    for log in logs:
        text = os.fspath(log)
        folder, name = os.path.split(text)
        if folder not in sidecars:
            sidecars[folder] = _sidecar_mtimes(folder)
        try:
            stat = os.stat(text)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((stat.st_size, stat.st_mtime_ns, sidecars[folder].get(name[:-len(".jsonl")] + ".json", 0)))
    return stamps


def _sidecar_mtimes(folder: str) -> dict[str, int]:
    """mtime_ns of each file in the folder's `.metadata/`, by name (none when there is no such folder)."""
    found = {}
    try:
        with os.scandir(os.path.join(folder, ".metadata")) as entries:
            for entry in entries:
                try:
                    found[entry.name] = entry.stat().st_mtime_ns
                except OSError:
                    continue
    except OSError:
        pass
    return found


def summarize(log: Path, pricing: Mapping | None = None) -> Summary | None:
    """Read one log (without its lock) into a Summary; None when it vanished meanwhile."""
    from khaelor import ledger
    from khaelor.session import SessionState

    stamp = fingerprint(log)
    if stamp is None:
        return None
    names = metadata.load(log)
    summary = Summary(str(log), str(log.parent), log.stem, name=names["name"], tags=names["tags"],
                      size=stamp[0], mtime_ns=stamp[1], meta_mtime_ns=stamp[2])
    try:
        records = read_log(log).records
    except JournalError as exc:
        summary.error = exc.message
        return summary
    state = SessionState.from_records(records)
    spent = ledger.build(state.usage, state.uncertain, pricing)
    header = records[0]
    summary.workspace, summary.created = header.get("workspace"), header.get("created")
    summary.updated = records[-1].get("ts") or header.get("ts")
    summary.title = metadata.title(log)
    summary.messages = sum(1 for entry in state.branch() if entry.get("message"))
    summary.model = state.model or header.get("model")
    summary.uncertain = len(state.uncertain)
    summary.cost_nanos = None if spent.total.unpriced and not spent.total.nanos else spent.total.nanos
    summary.cost_complete = spent.complete
    return summary


def summaries(sessions_root: Path, logs: list[Path], scope: list[Path] | None,
              pricing: Mapping | None = None) -> Listing:
    """Summaries of `logs` (in that order), through the catalog when it is usable.

    `scope` are the folders `logs` are all the logs of: catalog rows in them
    whose log is not among `logs` are dropped (None: the whole catalog is in scope).
    """
    import sqlite3

    path = catalog_path(sessions_root)
    if not logs and not path.exists():
        return Listing([], "unused")
    reason = None
    for attempt in (1, 2):
        try:
            return _through_catalog(path, logs, scope, pricing, reason)
        except sqlite3.OperationalError as exc:
            if attempt == 2 or _locked(exc):
                return Listing(_scan(logs, pricing), f"bypassed: {exc}", len(logs))
            reason = str(exc)
        except (sqlite3.DatabaseError, OSError, _Unusable) as exc:
            if attempt == 2:
                return Listing(_scan(logs, pricing), f"bypassed: {exc}", len(logs))
            reason = str(exc)
        _discard(path)
    raise AssertionError("unreachable")


class _Unusable(Exception):
    """The catalog exists but must be replaced (oversized or from a newer version)."""


def _through_catalog(path: Path, logs: list[Path], scope: list[Path] | None, pricing, reason: str | None) -> Listing:
    connection, created = _open(path)
    try:
        found, refreshed = _refresh(connection, logs, scope, pricing)
    finally:
        connection.close()
    status = f"rebuilt: {reason}" if reason else "rebuilt: missing" if created else "used"
    return Listing(found, status, refreshed)


def _open(path: Path):
    """Connect, checking size and version and applying pending migrations; returns (connection, created)."""
    import sqlite3

    private_dir(path.parent)
    created = not path.exists()
    if created:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    elif path.stat().st_size > MAX_CATALOG_BYTES:
        raise _Unusable(f"catalog is over {MAX_CATALOG_BYTES} bytes")
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise _Unusable(f"catalog schema version {version} is newer than this KHAELOR's {SCHEMA_VERSION}")
        if version < SCHEMA_VERSION:
            _migrate(connection, version)
    except BaseException:
        connection.close()
        raise
    return connection, created


def _migrate(connection, version: int) -> None:
    """Apply the migrations after `version`, in order, in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        for _name, statement in MIGRATIONS[version:]:
            connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _refresh(connection, logs: list[Path], scope: list[Path] | None, pricing) -> tuple[list[Summary], int]:
    """Bring the rows of `logs` up to date; drop rows of vanished logs in `scope`."""
    known = _rows(connection, scope)
    found, stale = [], []
    for log, stamp in zip(logs, fingerprints(logs)):
        row = known.get(str(log))
        if stamp is None:
            continue
        if row is None or row.fingerprint() != stamp:
            row = summarize(log, pricing)
            if row is None:
                continue
            stale.append(row)
        found.append(row)
    present = {str(log) for log in logs}
    vanished = [path for path in known if path not in present]
    if stale or vanished:
        _write(connection, stale, vanished)
    return found, len(stale)


def _rows(connection, scope: list[Path] | None) -> dict[str, Summary]:
    """The catalog's rows in the `scope` folders (None: all of them), by log path."""
    query = f"SELECT {', '.join(_COLUMNS)} FROM sessions"
    if scope is None:
        rows = connection.execute(query).fetchall()
    else:
        marks = ", ".join("?" * len(scope))
        rows = connection.execute(f"{query} WHERE folder IN ({marks})", [str(f) for f in scope]).fetchall()
    return {row[0]: Summary.from_row(row) for row in rows}


def _write(connection, stale: list[Summary], vanished: list[str]) -> None:
    marks = ", ".join("?" * len(_COLUMNS))
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(f"INSERT OR REPLACE INTO sessions ({', '.join(_COLUMNS)}) VALUES ({marks})",
                               [row.as_row() for row in stale])
        connection.executemany("DELETE FROM sessions WHERE path = ?", [(path,) for path in vanished])
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _scan(logs: list[Path], pricing) -> list[Summary]:
    return [summary for log in logs if (summary := summarize(log, pricing)) is not None]


def _locked(exc: Exception) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _discard(path: Path) -> None:
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def health(sessions_root: Path) -> tuple[str, str]:
    """('ok' | 'warn', detail) for `doctor`: read-only, never repairs."""
    import sqlite3

    path = catalog_path(sessions_root)
    if not path.exists():
        return "ok", "not built yet (the next listing builds it)"
    size = path.stat().st_size
    if size > MAX_CATALOG_BYTES:
        return "warn", f"{path} is {size} bytes, over the {MAX_CATALOG_BYTES} byte limit (the next listing rebuilds it)"
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            check = connection.execute("PRAGMA quick_check").fetchone()[0]
            rows = connection.execute("SELECT count(*) FROM sessions").fetchone()[0] if version else 0
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return "warn", f"{path} is unreadable ({exc}); the next listing rebuilds it"
    if version > SCHEMA_VERSION:
        return "warn", f"{path} has schema version {version}, newer than {SCHEMA_VERSION} (the next listing rebuilds it)"
    if check != "ok":
        return "warn", f"{path} fails its integrity check ({check}); the next listing rebuilds it"
    return "ok", f"{rows} session(s) indexed, schema version {version}"
