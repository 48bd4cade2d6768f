"""`khaelor sessions list/inspect/rename/tag/delete/restore/repair` through the real CLI in a subprocess."""

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from khaelor import cost, ledger
from khaelor.journal import Journal, read_log
from tests.conftest import run_khaelor
from tests.fakeapi import reply, text

USAGE = {"input_tokens": 1000, "output_tokens": 1000}


def logs_of(home: Path) -> list[Path]:
    return sorted(home.glob("sessions/*/*.jsonl"))


def new_session(api, workspace: Path, home: Path, request: str, answer: str = "done") -> Path:
    before = set(logs_of(home))
    api.script(reply(text(answer), usage=USAGE))
    done = run_khaelor(["-p", request], workspace, api)
    assert done.returncode == 0, done.stderr
    (log,) = set(logs_of(home)) - before
    return log


def spent_nanos(log: Path) -> int:
    """The session's cost as the ledger computes it from the log (the fake API adds cache usage of its own)."""
    records = read_log(log).records
    return ledger.build([r for r in records if r["type"] == "usage"], []).total.nanos


def sessions(args: list[str], cwd: Path) -> "object":
    return run_khaelor(["sessions", *args], cwd)


def one_clear_line(done, status: int = 2) -> str:
    assert done.returncode == status, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("khaelor: error: ")
    return done.stderr.splitlines()[0]


def test_list_shows_age_message_count_and_real_cost(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "fix the parser bug")
    done = sessions(["list"], workspace)
    assert done.returncode == 0, done.stderr
    (row,) = done.stdout.splitlines()
    assert row.startswith(log.stem)
    assert "just now" in row or "m ago" in row
    assert spent_nanos(log) > 0
    assert "2 msgs" in row and cost.format_usd(spent_nanos(log)) in row and "fix the parser bug" in row


def test_list_json_carries_exact_nanos_and_the_workspace(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "add a test")
    (item,) = json.loads(sessions(["list", "--json"], workspace).stdout)
    assert item["id"] == log.stem and item["title"] == "add a test" and item["messages"] == 2
    assert item["cost_nanos"] == spent_nanos(log) > 0 and item["cost_complete"] is True
    assert item["cost_usd"] == spent_nanos(log) / 1e9
    assert item["workspace"] == str(workspace.resolve()) and item["error"] is None


def test_list_search_words_phrases_and_regex(fake_api, workspace, khaelor_home):
    parser = new_session(fake_api, workspace, khaelor_home, "fix the parser bug")
    docs = new_session(fake_api, workspace, khaelor_home, "write the parser docs")

    def found(query: str) -> set[str]:
        done = sessions(["list", "--json", "--query", query], workspace)
        assert done.returncode == 0, done.stderr
        return {item["id"] for item in json.loads(done.stdout)}

    assert found("parser") == {parser.stem, docs.stem}
    assert found("PARSER bug") == {parser.stem}
    assert found("prsr bug") == {parser.stem}  # fuzzy: letters in order within a word
    assert found("dcs") == {docs.stem} and found("zqx") == set()
    assert found('"the parser docs"') == {docs.stem}
    assert found('"parser docs bug"') == set()
    assert found("re:fix .* bug$") == {parser.stem}
    assert found(docs.stem[-6:]) == {docs.stem}
    assert one_clear_line(sessions(["list", "--query", "re:(["], workspace)).startswith("khaelor: error: bad regex")
    assert "no sessions match" in sessions(["list", "--query", "nothing-like-it"], workspace).stdout


def test_list_is_per_workspace_unless_all_workspaces(fake_api, workspace, khaelor_home, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    mine = new_session(fake_api, workspace, khaelor_home, "here")
    theirs = new_session(fake_api, other, khaelor_home, "there")
    assert [item["id"] for item in json.loads(sessions(["list", "--json"], workspace).stdout)] == [mine.stem]
    everything = sessions(["list", "--all-workspaces"], workspace).stdout
    assert mine.stem in everything and theirs.stem in everything and f"[{other.resolve()}]" in everything


def test_list_reports_a_damaged_log_without_failing(fake_api, workspace, khaelor_home):
    good = new_session(fake_api, workspace, khaelor_home, "good one")
    bad = new_session(fake_api, workspace, khaelor_home, "bad one")
    lines = bad.read_bytes().split(b"\n")
    lines[1] = b"{not json"
    bad.write_bytes(b"\n".join(lines))
    done = sessions(["list"], workspace)
    assert done.returncode == 0, done.stderr
    assert good.stem in done.stdout
    assert f"{bad.stem}  damaged: " in done.stdout and "line 2" in done.stdout


def test_inspect_reports_head_leaves_and_abandoned_forks(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "first request", "first answer")
    fake_api.script(reply(text("second answer"), usage=USAGE))
    assert run_khaelor(["-p", "-c", "second request"], workspace, fake_api).returncode == 0
    first_answer = [r for r in read_log(log).records if r["type"] == "entry" and r["kind"] == "assistant"][0]
    journal, _ = Journal.open(log, time.time)
    journal.append("head", entry=first_answer["id"])
    journal.close()
    fake_api.script(reply(text("third answer"), usage=USAGE))
    assert run_khaelor(["-p", "-c", "third request"], workspace, fake_api).returncode == 0

    report = json.loads(sessions(["inspect", log.stem[:20], "--json"], workspace).stdout)
    assert report["title"] == "first request" and report["entries"] == 6 and report["branch_messages"] == 4
    assert len(report["roots"]) == 1
    leaves = {leaf["text"]: leaf for leaf in report["leaves"]}
    assert set(leaves) == {"second answer", "third answer"}
    assert leaves["third answer"]["is_head"] and not leaves["second answer"]["on_head_branch"]
    assert report["head"]["id"] == leaves["third answer"]["id"]
    assert report["usage"]["total"]["nanos"] == spent_nanos(log) and report["uncertain_attempts"] == 0

    shown = sessions(["inspect", log.stem], workspace).stdout
    assert "second answer" in shown and "abandoned fork" in shown and "— head: third answer" in shown
    assert f"total        {cost.format_usd(spent_nanos(log))}" in shown and "checkpoints  0" in shown


def test_rename_and_tag_keep_a_sidecar_and_journal_the_change(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "tidy imports")
    assert sessions(["rename", log.stem, "import cleanup"], workspace).returncode == 0
    done = sessions(["tag", log.stem, "refactor", "small"], workspace)
    assert done.returncode == 0 and done.stdout.strip().endswith("tags: refactor, small")
    assert sessions(["tag", log.stem, "--remove", "small"], workspace).stdout.strip().endswith("tags: refactor")
    sidecar = json.loads((log.parent / ".metadata" / f"{log.stem}.json").read_text())
    assert sidecar == {"name": "import cleanup", "tags": ["refactor"]}
    records = read_log(log).records
    assert [(r["type"], r.get("name") or r.get("tags")) for r in records if r["type"] in ("rename", "tag")] == [
        ("rename", "import cleanup"), ("tag", ["refactor", "small"]), ("tag", ["refactor"])]
    row = sessions(["list", "--query", "#refactor"], workspace).stdout
    assert "no sessions match" in row
    row = sessions(["list", "--query", "cleanup refactor"], workspace).stdout
    assert "import cleanup — tidy imports #refactor" in row


def test_rename_of_a_session_in_use_writes_only_the_sidecar(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "long task")
    journal, _ = Journal.open(log, time.time)
    try:
        before = log.read_bytes()
        done = sessions(["rename", log.stem, "busy one"], workspace)
        assert done.returncode == 0, done.stderr
        assert f"sidecar only, not journaled: session {log.stem} is in use by pid {os.getpid()}" in done.stdout
        assert log.read_bytes() == before
    finally:
        journal.close()
    assert "busy one" in sessions(["list"], workspace).stdout


def test_tag_needs_a_tag(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "x")
    assert "TAG" in one_clear_line(sessions(["tag", log.stem], workspace))


def test_delete_moves_to_trash_and_restore_brings_it_back(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "keep me")
    sessions(["rename", log.stem, "precious"], workspace)
    original = log.read_bytes()
    done = sessions(["delete", log.stem[:22]], workspace)
    assert done.returncode == 0, done.stderr
    assert not log.exists() and (log.parent / ".trash" / log.name).read_bytes() == original
    assert "no sessions" in sessions(["list"], workspace).stdout
    assert one_clear_line(sessions(["inspect", log.stem], workspace)).endswith(f"no session matches {log.stem!r}")
    done = sessions(["restore", log.stem[:22]], workspace)
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == original and "precious" in sessions(["list"], workspace).stdout
    assert "no trashed session matches" in one_clear_line(sessions(["restore", log.stem], workspace))


def test_delete_refuses_a_session_in_use(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "running")
    journal, _ = Journal.open(log, time.time)
    try:
        line = one_clear_line(sessions(["delete", log.stem], workspace), status=1)
    finally:
        journal.close()
    assert line == f"khaelor: error: session {log.stem} is in use by pid {os.getpid()}"
    assert log.exists()


def test_repair_removes_only_a_torn_final_append_after_a_private_backup(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "interrupted")
    original = log.read_bytes()
    log.write_bytes(original + b'{"type":"entry","v":1,"ts":"2026-')
    done = sessions(["repair", log.stem], workspace)
    assert done.returncode == 0, done.stderr
    assert "removed an interrupted final append (33 bytes" in done.stdout
    assert log.read_bytes() == original
    (backup,) = (log.parent / ".repair").iterdir()
    assert backup.read_bytes() == original + b'{"type":"entry","v":1,"ts":"2026-'
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert "nothing to repair" in sessions(["repair", log.stem], workspace).stdout


def test_repair_reports_a_corrupt_completed_record_and_changes_nothing(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "damaged")
    lines = log.read_bytes().split(b"\n")
    lines[2] = lines[2][:-5] + b"\xff\xfe}}}"
    damaged = b"\n".join(lines) + b'{"torn'
    log.write_bytes(damaged)
    digest = hashlib.sha256(damaged).hexdigest()
    line = one_clear_line(sessions(["repair", log.stem], workspace), status=1)
    assert "line 3: invalid UTF-8" in line and "left unchanged" in line
    assert hashlib.sha256(log.read_bytes()).hexdigest() == digest
    assert not (log.parent / ".repair").exists()


def test_unknown_and_ambiguous_prefixes_are_one_clear_line(fake_api, workspace, khaelor_home):
    first = new_session(fake_api, workspace, khaelor_home, "one")
    new_session(fake_api, workspace, khaelor_home, "two")
    for command in (["inspect"], ["rename", "_", "n"], ["tag", "_", "t"], ["delete"], ["repair"]):
        args = [command[0], "2", *command[2:]]
        assert "is ambiguous" in one_clear_line(sessions(args, workspace))
        args = [command[0], "1999", *command[2:]]
        assert one_clear_line(sessions(args, workspace)) == "khaelor: error: no session matches '1999'"
    assert "not a session id" in one_clear_line(sessions(["inspect", "../x"], workspace))
    assert first.exists()


def test_a_bad_query_is_a_usage_error_even_in_an_empty_store(workspace):
    assert "bad regex" in one_clear_line(sessions(["list", "--query", "re:(["], workspace))
    assert "unclosed quote" in one_clear_line(sessions(["list", "--query", '"half'], workspace))


def test_inspect_of_a_damaged_log_is_one_clear_line(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home, "soon damaged")
    lines = log.read_bytes().split(b"\n")
    lines[1] = b'{"no type": 1}'
    log.write_bytes(b"\n".join(lines))
    line = one_clear_line(sessions(["inspect", log.stem], workspace), status=1)
    assert line.endswith("line 2: not a record (an object with a 'type')")
