"""The session log: durable one-line appends, strict bounded reads, locking, torn tails."""

import json
import os
import stat
import subprocess
import sys

import pytest

from khaelor.errors import JournalError, SessionInUse
from khaelor.journal import Journal, read_log

HEADER = {"session_id": "20261129T000000-abcdef", "workspace": "/w", "model": "m"}


def clock():
    return 1_790_000_000.0


@pytest.fixture
def log(tmp_path):
    folder = tmp_path / "sessions" / "ws"
    folder.mkdir(parents=True, mode=0o700)
    return folder / "20261129T000000-abcdef.jsonl"


def test_records_round_trip_one_line_each(log):
    journal = Journal.create(log, HEADER, clock)
    journal.append("entry", id="a", parent=None, kind="user", message={"role": "user", "content": "héllo\nwörld"})
    journal.append("usage", usage={"input_tokens": 3})
    journal.close()
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4
    contents = read_log(log)
    assert [r["type"] for r in contents.records] == ["header", "entry", "usage"]
    assert contents.records[1]["message"]["content"] == "héllo\nwörld"
    assert all(r["v"] == 1 and r["ts"].endswith("Z") for r in contents.records)
    assert contents.torn_offset is None


def test_files_are_owner_private(log):
    Journal.create(log, HEADER, clock).close()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    locks = log.parent / ".locks"
    assert stat.S_IMODE(locks.stat().st_mode) == 0o700


def test_create_refuses_an_existing_log(log):
    Journal.create(log, HEADER, clock).close()
    with pytest.raises(JournalError, match="already exists"):
        Journal.create(log, HEADER, clock)


def test_second_process_is_told_the_holder_pid(log):
    journal = Journal.create(log, HEADER, clock)
    code = (
        "import sys; from pathlib import Path; from khaelor.journal import Journal\n"
        "from khaelor.errors import SessionInUse\n"
        "try:\n    Journal.open(Path(sys.argv[1]), lambda: 0.0)\nexcept SessionInUse as e:\n    print(e.message)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, timeout=30)
    assert f"in use by pid {os.getpid()}" in done.stdout
    journal.close()
    reopened, _ = Journal.open(log, clock)
    reopened.close()


def test_same_process_second_open_is_refused(log):
    journal = Journal.create(log, HEADER, clock)
    with pytest.raises(SessionInUse, match="in use by pid"):
        Journal.open(log, clock)
    journal.close()


def test_torn_final_line_is_ignored_then_removed_with_a_backup(log):
    journal = Journal.create(log, HEADER, clock)
    journal.append("entry", id="a", parent=None, kind="user", message=None)
    journal.close()
    complete = log.stat().st_size
    with open(log, "ab") as handle:
        handle.write(b'{"type":"entry","id":"b","par')
    contents = read_log(log)
    assert len(contents.records) == 2 and contents.torn_offset == complete
    journal, contents = Journal.open(log, clock)
    journal.append("close")
    journal.close()
    records = read_log(log).records
    assert [r["type"] for r in records] == ["header", "entry", "torn_tail_removed", "close"]
    backup = records[2]["backup"]
    assert open(backup, "rb").read() == b'{"type":"entry","id":"b","par'
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600


def test_corrupt_middle_line_is_named_and_nothing_is_rewritten(log):
    journal = Journal.create(log, HEADER, clock)
    journal.append("entry", id="a", parent=None, kind="user", message=None)
    journal.close()
    with open(log, "ab") as handle:
        handle.write(b'{"type": broken}\n{"type":"close"}\n')
    before = log.read_bytes()
    with pytest.raises(JournalError, match=r"line 3: invalid JSON"):
        read_log(log)
    with pytest.raises(JournalError, match=r"line 3"):
        Journal.open(log, clock)
    assert log.read_bytes() == before


def test_invalid_utf8_is_reported_by_line(log):
    Journal.create(log, HEADER, clock).close()
    with open(log, "ab") as handle:
        handle.write(b'{"type":"x","text":"\xff\xfe"}\n')
    with pytest.raises(JournalError, match=r"line 2: invalid UTF-8"):
        read_log(log)


def test_non_record_json_is_rejected(log):
    Journal.create(log, HEADER, clock).close()
    with open(log, "ab") as handle:
        handle.write(b'[1, 2]\n')
    with pytest.raises(JournalError, match=r"line 2: not a record"):
        read_log(log)


def test_log_from_a_newer_format_is_refused(log):
    log.write_text(json.dumps({"type": "header", "format": "khaelor-session", "version": 99}) + "\n")
    with pytest.raises(JournalError, match="newer KHAELOR"):
        read_log(log)


def test_a_file_that_is_not_a_log_is_refused(log):
    log.write_text('{"type":"entry"}\n')
    with pytest.raises(JournalError, match="does not start with a header"):
        read_log(log)


def test_oversized_record_is_refused_on_write_and_read(log, monkeypatch):
    import khaelor.journal as journal_module

    monkeypatch.setattr(journal_module, "MAX_RECORD_BYTES", 1024)
    journal = Journal.create(log, HEADER, clock)
    with pytest.raises(JournalError, match="exceeds"):
        journal.append("tool_result", content="x" * 2000)
    journal.close()
    with open(log, "ab") as handle:
        handle.write(b'{"type":"x","pad":"' + b"y" * 3000 + b'"}\n')
    with pytest.raises(JournalError, match="line 2: record longer"):
        read_log(log)


def test_lone_surrogates_stay_valid_utf8(log):
    journal = Journal.create(log, HEADER, clock)
    journal.append("tool_result", content="bad \udcff byte")
    journal.close()
    assert read_log(log).records[1]["content"] == "bad \udcff byte"


def test_listeners_see_each_record(log):
    journal = Journal.create(log, HEADER, clock)
    seen = []
    journal.listeners.append(seen.append)
    journal.append("usage", usage={})
    journal.close()
    assert [r["type"] for r in seen] == ["usage"]


def test_append_after_close_is_an_error(log):
    journal = Journal.create(log, HEADER, clock)
    journal.close()
    with pytest.raises(JournalError, match="closed"):
        journal.append("close")
