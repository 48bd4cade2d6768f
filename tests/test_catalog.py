"""The disposable catalog: refreshed by fingerprint, rebuilt when damaged, never the reason a listing fails."""

import json
import sqlite3
import stat
import time
from pathlib import Path

from khaelor import catalog, metadata
from khaelor.journal import Journal
from tests.conftest import run_khaelor
from tests.fakeapi import reply, text


def new_session(api, workspace: Path, home: Path, request: str) -> Path:
    before = set(home.glob("sessions/*/*.jsonl"))
    api.script(reply(text("ok")))
    assert run_khaelor(["-p", request], workspace, api).returncode == 0
    (log,) = set(home.glob("sessions/*/*.jsonl")) - before
    return log


def listed(workspace: Path) -> list[dict]:
    done = run_khaelor(["sessions", "list", "--json"], workspace)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def catalog_file(home: Path) -> Path:
    return home / "sessions" / ".catalog" / "sessions-v1.sqlite3"


def rows(home: Path) -> dict[str, tuple]:
    with sqlite3.connect(catalog_file(home)) as connection:
        return {row[0]: row[1:] for row in connection.execute("SELECT id, title, messages, name FROM sessions")}


def user_version(home: Path) -> int:
    with sqlite3.connect(catalog_file(home)) as connection:
        return connection.execute("PRAGMA user_version").fetchone()[0]


def test_listing_builds_an_owner_private_catalog(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "index me")
    assert not catalog_file(khaelor_home).exists()
    listed(workspace)
    assert rows(khaelor_home) == {log.stem: ("index me", 2, None)}
    assert user_version(khaelor_home) == catalog.SCHEMA_VERSION == len(catalog.MIGRATIONS)
    assert stat.S_IMODE(catalog_file(khaelor_home).stat().st_mode) == 0o600
    assert stat.S_IMODE(catalog_file(khaelor_home).parent.stat().st_mode) == 0o700


def test_only_stale_rows_are_refreshed_and_vanished_ones_dropped(fake_api, workspace, khaelor_home):
    first = new_session(fake_api, workspace, khaelor_home, "first")
    second = new_session(fake_api, workspace, khaelor_home, "second")
    store_root, logs = khaelor_home / "sessions", sorted([first, second])
    assert catalog.summaries(store_root, logs, [first.parent]).refreshed == 2
    assert catalog.summaries(store_root, logs, [first.parent]).refreshed == 0
    journal, _ = Journal.open(first, time.time)
    journal.append("entry", id="e-extra", parent=None, kind="user", message={"role": "user", "content": "more"})
    journal.close()
    metadata.save(second, "renamed elsewhere", [])
    listing = catalog.summaries(store_root, logs, [first.parent])
    assert listing.refreshed == 2 and listing.catalog == "used"
    by_id = {summary.id: summary for summary in listing.sessions}
    assert by_id[first.stem].messages == 1 and by_id[second.stem].name == "renamed elsewhere"
    second.unlink()
    assert [item["id"] for item in listed(workspace)] == [first.stem]
    assert set(rows(khaelor_home)) == {first.stem}


def test_fingerprints_of_a_folder_match_one_by_one_and_rows_round_trip(fake_api, workspace, khaelor_home):
    first = new_session(fake_api, workspace, khaelor_home, "first")
    second = new_session(fake_api, workspace, khaelor_home, "second")
    metadata.save(second, "named", ["one", "two"])
    logs = sorted([first, second]) + [first.with_name("20260101T000000-000-000000.jsonl")]
    stamps = catalog.fingerprints(logs)
    assert stamps == [catalog.fingerprint(log) for log in logs]
    assert stamps[0][2] == 0 and stamps[1][2] == metadata.sidecar(second).stat().st_mtime_ns and stamps[2] is None
    summary = catalog.summarize(second)
    assert catalog.Summary.from_row(summary.as_row()) == summary and summary.tags == ["one", "two"]


def test_garbage_catalog_is_rebuilt_and_the_listing_still_answers(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "survive garbage")
    listed(workspace)
    catalog_file(khaelor_home).write_bytes(b"this is not a database at all" * 100)
    assert [item["id"] for item in listed(workspace)] == [log.stem]
    assert rows(khaelor_home) == {log.stem: ("survive garbage", 2, None)}


def test_truncated_catalog_is_rebuilt(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "survive truncation")
    listed(workspace)
    with open(catalog_file(khaelor_home), "r+b") as handle:
        handle.truncate(700)
    assert [item["title"] for item in listed(workspace)] == ["survive truncation"]
    assert set(rows(khaelor_home)) == {log.stem}


def test_deleted_catalog_folder_is_safe(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "again")
    listed(workspace)
    for path in catalog_file(khaelor_home).parent.iterdir():
        path.unlink()
    catalog_file(khaelor_home).parent.rmdir()
    assert [item["id"] for item in listed(workspace)] == [log.stem]
    assert catalog_file(khaelor_home).exists()


def test_catalog_from_a_newer_version_is_rebuilt(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "from the future")
    listed(workspace)
    with sqlite3.connect(catalog_file(khaelor_home)) as connection:
        connection.execute("DROP TABLE sessions")
        connection.execute("CREATE TABLE sessions (something_else TEXT)")
        connection.execute(f"PRAGMA user_version = {catalog.SCHEMA_VERSION + 5}")
    assert [item["id"] for item in listed(workspace)] == [log.stem]
    assert user_version(khaelor_home) == catalog.SCHEMA_VERSION and set(rows(khaelor_home)) == {log.stem}


def test_an_older_catalog_is_migrated_in_order(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "old schema")
    catalog_file(khaelor_home).parent.mkdir(mode=0o700, parents=True)
    with sqlite3.connect(catalog_file(khaelor_home)) as connection:
        connection.execute(catalog.MIGRATIONS[0][1])
        connection.execute("PRAGMA user_version = 1")
    assert [item["id"] for item in listed(workspace)] == [log.stem]
    with sqlite3.connect(catalog_file(khaelor_home)) as connection:
        indexes = {row[1] for row in connection.execute("PRAGMA index_list(sessions)")}
    assert "sessions_folder" in indexes and user_version(khaelor_home) == 2


def test_oversized_catalog_is_replaced(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "too big")
    listed(workspace)
    with open(catalog_file(khaelor_home), "r+b") as handle:
        handle.truncate(catalog.MAX_CATALOG_BYTES + 1)  # sparse: cheap on disk
    assert [item["id"] for item in listed(workspace)] == [log.stem]
    assert catalog_file(khaelor_home).stat().st_size < 1 << 20


def test_a_locked_catalog_is_bypassed(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "locked out")
    listed(workspace)
    holder = sqlite3.connect(catalog_file(khaelor_home), isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("DELETE FROM sessions")
        started = time.monotonic()
        assert [item["title"] for item in listed(workspace)] == ["locked out"]
        assert time.monotonic() - started < 10
        listing = catalog.summaries(khaelor_home / "sessions", [log], [log.parent])
        assert listing.catalog.startswith("bypassed") and listing.sessions[0].id == log.stem
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert set(rows(khaelor_home)) == {log.stem}
