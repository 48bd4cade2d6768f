"""The session goal end to end (print mode, and the REPL on pipes while a turn runs), and its store."""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from khaelor import goal
from khaelor.journal import read_log
from tests.conftest import khaelor_env, run_khaelor, start_khaelor
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


class PipedRepl:
    """The REPL with pipes for stdin and stdout: type lines while it works, read what it printed so far."""

    def __init__(self, cwd, api):
        self.proc = subprocess.Popen([sys.executable, "-m", "khaelor"], cwd=cwd, env=khaelor_env(api),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._out = b""
        self._grew = threading.Condition()
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    @property
    def output(self) -> str:
        with self._grew:
            return self._out.decode()

    def type(self, line: str) -> None:
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()

    def wait_for(self, needle: str, timeout: float = 30) -> None:
        with self._grew:
            if not self._grew.wait_for(lambda: needle.encode() in self._out, timeout):
                raise AssertionError(f"did not see {needle!r}; got {self._out.decode()[-2000:]!r}")

    def finish(self) -> tuple[int, str]:
        """Close stdin (end of input) and return the exit status and stderr."""
        self.proc.stdin.close()
        status = self.proc.wait(60)
        self._reader.join(10)
        return status, self.proc.stderr.read().decode()

    def _collect(self) -> None:
        while chunk := os.read(self.proc.stdout.fileno(), 65536):
            with self._grew:
                self._out += chunk
                self._grew.notify_all()


def test_goal_pause_typed_during_a_turn_applies_at_once_and_other_commands_wait(workspace):
    with FakeAPI() as api:
        api.script(reply(text("first half, second half"), hold_after=4), reply(text("never asked for")))
        repl = PipedRepl(workspace, api)
        try:
            repl.type("/goal ship the release\n")
            assert api.held.wait(30)
            repl.wait_for("first half")
            repl.type("/goal pause\n")
            repl.wait_for("goal paused (1/10 continuations): ship the release — paused by you")
            assert api.held.is_set(), "the turn was still running"
            repl.type("/model other-model\n")
            time.sleep(1)
            assert "model: other-model" not in repl.output
            api.release()
            repl.wait_for("model: other-model")
            status, err = repl.finish()
        finally:
            repl.proc.kill()
        assert status == 0, err
        assert len(api.message_requests) == 1 and api.pending() == 1
    assert repl.output.splitlines()[1:] == [
        "goal set: ship the release",
        "↻ continuing toward the goal",
        "first half,",
        "goal paused (1/10 continuations): ship the release — paused by you",
        " second half",
        "model: other-model",
    ]


def test_goal_set_during_a_plain_turn_is_pursued_after_it(workspace, khaelor_home):
    khaelor_home.mkdir(parents=True, exist_ok=True)
    (khaelor_home / "config.yaml").write_text("goal: {grace_seconds: 0}\n")
    with FakeAPI() as api:
        api.script(reply(text("an answer"), hold_after=4), reply(text("tidied\nGOAL_COMPLETE")))
        repl = PipedRepl(workspace, api)
        try:
            repl.type("hello\n")
            assert api.held.wait(30)
            repl.type("/goal tidy up\n")
            repl.wait_for("goal set: tidy up")
            assert api.held.is_set(), "the turn was still running"
            api.release()
            repl.wait_for("goal complete")
            status, err = repl.finish()
        finally:
            repl.proc.kill()
        assert status == 0, err
        assert continuation_requests(api) == 1 and "tidy up" in json.dumps(api.message_requests[-1].body)
