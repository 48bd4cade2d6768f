"""Crash safety: SIGKILL at many points, then --continue settles the log without re-running anything."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from khaelor.journal import read_log
from khaelor.session import INDETERMINATE
from tests.conftest import run_khaelor, start_khaelor
from tests.fakeapi import FakeAPI, reply, text, tool_use

COUNT = "echo ran >> counter.txt"


def the_log(home: Path) -> Path:
    [log] = sorted(home.glob("sessions/*/*.jsonl"))
    return log


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.005)


def line_count(home: Path) -> int:
    logs = sorted(home.glob("sessions/*/*.jsonl"))
    return logs[0].read_bytes().count(b"\n") if logs else 0


def kill_children_of(log: Path) -> None:
    """Children of a killed run outlive it (own process group); end them so tests leave nothing behind."""
    for record in read_log(log).records:
        if record["type"] == "process_start" and record.get("pid"):
            try:
                os.killpg(record["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def tool_results(request) -> list[dict]:
    return [b for m in request.body["messages"] for b in m["content"] if b.get("type") == "tool_result"]


def slow_task(api: FakeAPI) -> None:
    api.script(
        reply(tool_use("bash", {"command": COUNT + "; sleep 0.2"}), delay=0.02),
        reply(tool_use("write", {"path": "a.txt", "content": "one\n"}), delay=0.02),
        reply(tool_use("bash", {"command": COUNT}), tool_use("read", {"path": "a.txt"}), delay=0.02),
        reply(text("finished"), delay=0.02),
    )


@pytest.mark.parametrize("kill_at", [2, 3, 4, 6, 8, 10, 12, 14, 17, 20, 24, 28])
def test_sigkill_anywhere_then_continue_reruns_nothing(workspace, khaelor_home, kill_at):
    with FakeAPI() as api:
        slow_task(api)
        proc = start_khaelor(["-p", "do the task", "--permission-mode", "bypass"], workspace, api)
        try:
            wait_for(lambda: line_count(khaelor_home) >= kill_at or proc.poll() is not None)
        finally:
            proc.kill()
            proc.wait()
    log = the_log(khaelor_home)
    kill_children_of(log)
    time.sleep(0.3)  # a child spawned just before the kill, not yet journaled, finishes its echo
    before = read_log(log)
    counter = workspace / "counter.txt"
    ran_before = counter.read_text().count("ran") if counter.exists() else 0
    with FakeAPI() as api:
        api.script(reply(text("resumed")))
        done = run_khaelor(["-p", "-c", "carry on", "--output-format", "json"], workspace, api)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["result"] == "resumed"
        ran_after = counter.read_text().count("ran") if counter.exists() else 0
        assert ran_after == ran_before, "a tool call was re-run on resume"
        sent = api.message_requests[0].body["messages"]
        uses = [b["id"] for m in sent for b in m["content"] if b.get("type") == "tool_use"]
        answered = [r["tool_use_id"] for r in tool_results(api.message_requests[0])]
        assert sorted(uses) == sorted(answered), "every tool_use must have a result"
    after = read_log(log)
    assert after.records[: len(before.records)] == before.records, "resume rewrote history"
    assert after.torn_offset is None


def test_kill_mid_tool_gives_indeterminate_result(workspace, khaelor_home):
    with FakeAPI() as api:
        api.script(reply(tool_use("bash", {"command": COUNT + "; sleep 60"})))
        proc = start_khaelor(["-p", "run it", "--permission-mode", "bypass"], workspace, api)
        wait_for(lambda: (workspace / "counter.txt").exists() and (workspace / "counter.txt").read_text())
        proc.kill()
        proc.wait()
    kill_children_of(the_log(khaelor_home))
    with FakeAPI() as api:
        api.script(reply(text("ok")))
        done = run_khaelor(["-p", "-c", "what happened?"], workspace, api)
        assert done.returncode == 0, done.stderr
        [result] = tool_results(api.message_requests[0])
        assert result["is_error"] is True and result["content"] == INDETERMINATE
    assert (workspace / "counter.txt").read_text() == "ran\n"
    assert "no result" in done.stderr


def test_kill_mid_stream_records_uncertainty_on_resume(workspace, khaelor_home):
    with FakeAPI() as api:
        api.script(reply(text("a long answer that never ends"), hold_after=3))
        proc = start_khaelor(["-p", "talk"], workspace, api)
        assert api.held.wait(30)
        proc.kill()
        proc.wait()
        api.release()
    with FakeAPI() as api:
        api.script(reply(text("ok")))
        done = run_khaelor(["-p", "-c", "again", "--output-format", "json"], workspace, api)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["usage_uncertain_attempts"] == 1
    records = read_log(the_log(khaelor_home)).records
    [uncertain] = [r for r in records if r["type"] == "usage_uncertainty"]
    assert uncertain["reason"] == "the process ended during the request"


@pytest.mark.parametrize("signame, status", [("SIGINT", 130), ("SIGTERM", 143)])
def test_signals_journal_a_cancellation(workspace, khaelor_home, signame, status):
    with FakeAPI() as api:
        api.script(reply(text("never finished"), hold_after=3))
        proc = start_khaelor(["-p", "talk"], workspace, api)
        assert api.held.wait(30)
        proc.send_signal(getattr(signal, signame))
        assert proc.wait(30) == status
        api.release()
    kinds = [r["type"] for r in read_log(the_log(khaelor_home)).records]
    assert kinds[-2:] == ["cancel", "close"]
    assert "usage_uncertainty" in kinds


def test_sigterm_mid_tool_kills_the_child_and_says_so(workspace, khaelor_home):
    with FakeAPI() as api:
        api.script(reply(tool_use("bash", {"command": COUNT + "; sleep 60; echo late >> counter.txt"})))
        proc = start_khaelor(["-p", "run", "--permission-mode", "bypass"], workspace, api)
        wait_for(lambda: (workspace / "counter.txt").exists() and (workspace / "counter.txt").read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 143
    records = read_log(the_log(khaelor_home)).records
    [result] = [r for r in records if r["type"] == "tool_result"]
    assert result["is_error"] and "SIGTERM" in result["content"]
    time.sleep(0.2)
    assert (workspace / "counter.txt").read_text() == "ran\n"


def test_torn_tail_is_tolerated_and_corrupt_middle_is_named(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")))
    assert run_khaelor(["-p", "first"], workspace, fake_api).returncode == 0
    log = the_log(khaelor_home)
    with open(log, "ab") as handle:
        handle.write(b'{"type":"entry","id":"zz"')
    done = run_khaelor(["-p", "-c", "second"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    lines = log.read_bytes().splitlines()
    lines[2] = b"{not json"
    log.write_bytes(b"\n".join(lines) + b"\n")
    done = run_khaelor(["-p", "-c", "third"], workspace, fake_api)
    assert done.returncode == 1
    assert done.stderr.splitlines()[0].endswith("line 3: invalid JSON (Expecting property name enclosed in double quotes at column 2)")
    assert "Traceback" not in done.stderr
