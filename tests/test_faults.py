"""API faults through the real SDK: retried with a visible line, uncertainty journaled, never taken as a reply."""

import json
from pathlib import Path

import pytest

from khaelor.journal import read_log
from tests.conftest import run_khaelor
from tests.fakeapi import error_response, reply, text


@pytest.fixture(autouse=True)
def quick_backoff(khaelor_home):
    khaelor_home.mkdir(parents=True, exist_ok=True)
    (khaelor_home / "config.yaml").write_text("api:\n  max_attempts: 3\n  initial_backoff: 0.01\n  max_backoff: 0.02\n")


def records(home: Path) -> list[dict]:
    [log] = sorted(home.glob("sessions/*/*.jsonl"))
    return read_log(log).records


@pytest.mark.parametrize("status, reason", [(429, "rate limited"), (529, "overloaded")])
def test_retryable_status_is_retried_and_succeeds(fake_api, workspace, khaelor_home, status, reason):
    fake_api.script(error_response(status), reply(text("after retry")))
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "after retry\n"
    assert f"retrying ({reason})" in done.stderr
    assert len(fake_api.message_requests) == 2
    kinds = [r["type"] for r in records(khaelor_home)]
    assert kinds.count("request") == 2 and "request_failed" in kinds and "usage_uncertainty" not in kinds


def test_stream_cut_midway_is_retried_and_leaves_usage_uncertainty(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("this reply is cut off"), cut_after=4), reply(text("complete")))
    done = run_khaelor(["-p", "hi", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "complete" and result["usage_uncertain_attempts"] == 1
    [uncertain] = [r for r in records(khaelor_home) if r["type"] == "usage_uncertainty"]
    assert set(uncertain) <= {"type", "v", "ts", "attempt", "model", "operation", "reason", "request_id"}
    assert uncertain["operation"] == "turn" and uncertain["model"]


def test_stream_without_message_stop_is_not_a_reply(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("PARTIAL"), no_message_stop=True), reply(text("whole")))
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "whole\n"
    entries = [r for r in records(khaelor_home) if r["type"] == "entry" and r["kind"] == "assistant"]
    assert len(entries) == 1 and entries[0]["message"]["content"][0]["text"] == "whole"
    assert len(fake_api.message_requests) == 2


def test_error_event_mid_stream_is_retried(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("x"), error_event_after=3), reply(text("recovered")))
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "recovered\n"
    assert "overloaded_error" in done.stderr


def test_retries_are_bounded(fake_api, workspace):
    fake_api.script(error_response(529), error_response(529), error_response(529), reply(text("too late")))
    done = run_khaelor(["-p", "hi", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    assert "failed 3 times" in json.loads(done.stdout)["result"]
    assert fake_api.pending() == 1


def test_server_saying_do_not_retry_is_obeyed(fake_api, workspace):
    fake_api.script(error_response(500, should_retry=False), reply(text("unused")))
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 1
    assert "500" in done.stderr and "Traceback" not in done.stderr
    assert fake_api.pending() == 1
