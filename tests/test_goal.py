"""The session goal in print mode end to end, and its store."""

import json

import pytest

from khaelor import goal
from khaelor.journal import read_log
from tests.conftest import run_khaelor, start_khaelor
from tests.fakeapi import FakeAPI, reply, text

CONTINUE = "Continue working toward the session goal"


def continuation_requests(api) -> int:
    return sum(CONTINUE in json.dumps(r.body["messages"][-1]) for r in api.message_requests)


def test_three_continuations_then_complete(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("started")), reply(text("more")), reply(text("almost")),
                    reply(text("finished\nGOAL_COMPLETE")))
    done = run_khaelor(["-p", "--goal", "make the tests pass", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert continuation_requests(fake_api) == 3
    assert result["goal"]["state"] == "complete" and result["goal"]["used"] == 3
    assert result["stop_reason"] == "goal_complete" and result["num_turns"] == 4
    assert set(result["cost"]["by_operation"]) == {"turn", "goal"}
    assert result["cost"]["by_operation"]["goal"]["requests"] == 3


def test_blocked_stops_and_shows_the_reason(fake_api, workspace):
    fake_api.script(reply(text("trying")), reply(text("GOAL_BLOCKED: missing credentials")), reply(text("never")))
    done = run_khaelor(["-p", "--goal", "deploy", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["goal"]["state"] == "blocked" and result["goal"]["reason"] == "missing credentials"
    assert "missing credentials" in result["result"] and fake_api.pending() == 1


def test_budget_of_two_stops_after_two(fake_api, workspace, khaelor_home):
    khaelor_home.mkdir(parents=True, exist_ok=True)
    (khaelor_home / "config.yaml").write_text("goal: {budget: 2}\n")
    fake_api.script(*[reply(text(f"step {n}")) for n in range(5)])
    done = run_khaelor(["-p", "--goal", "refactor", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    assert continuation_requests(fake_api) == 2 and fake_api.pending() == 2
    assert json.loads(done.stdout)["goal"]["state"] == "paused"


def test_max_turns_bounds_the_whole_goal_run(fake_api, workspace):
    fake_api.script(*[reply(text(f"step {n}")) for n in range(6)])
    done = run_khaelor(["-p", "--goal", "x", "--max-turns", "3", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    assert json.loads(done.stdout)["stop_reason"] == "max_turns" and len(fake_api.message_requests) == 3


def test_sigkill_mid_goal_then_continue_pauses_it(workspace, khaelor_home):
    with FakeAPI() as api:
        api.script(reply(text("first")), reply(text("stuck"), hold_after=3))
        proc = start_khaelor(["-p", "--goal", "ship it"], workspace, api)
        assert api.held.wait(30)
        proc.kill()
        proc.wait()
        api.release()
    with FakeAPI() as api:
        api.script(reply(text("just this")))
        done = run_khaelor(["-p", "-c", "status?", "--output-format", "json"], workspace, api)
        assert done.returncode == 0, done.stderr
        assert len(api.message_requests) == 1
    result = json.loads(done.stdout)
    assert result["goal"]["state"] == "paused" and "interrupted" in result["goal"]["reason"]
    assert "goal paused" in done.stderr


def test_goal_flag_needs_print_mode(workspace):
    done = run_khaelor(["--goal", "x"], workspace, None)
    assert done.returncode == 2 and "/goal" in done.stderr


def test_store_round_trip_and_settle(tmp_path):
    log = tmp_path / "s.jsonl"
    assert goal.load(log) is None
    goal.save(log, goal.Goal("objective", budget=1))
    assert oct(goal.store_path(log).stat().st_mode & 0o777) == "0o600"
    assert goal.take_continuation(log).startswith(CONTINUE)
    assert goal.take_continuation(log) is None
    assert goal.load(log).state == "paused"
    assert goal.settle(goal.Goal("o"), "x\n  GOAL_COMPLETE  \n").state == "complete"
    assert goal.settle(goal.Goal("o"), "GOAL_COMPLETE is what I will say later").state == "active"
    goal.store_path(log).write_text("{broken")
    with pytest.raises(goal.GoalStoreError, match="cannot read"):
        goal.load(log)
