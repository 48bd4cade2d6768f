"""Compaction and the cost ceiling end to end: real CLI, real SDK, fake API reporting known usage."""

import io
import json

import pytest
import yaml

from khaelor.compaction import CHECKPOINT_KEYS, parse_checkpoint
from khaelor.journal import read_log
from tests.conftest import run_khaelor
from tests.fakeapi import FakeAPI, error_response, reply, text, tool_use

BIG = {"input_tokens": 950_000, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 10}
SMALL = {"input_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 10}
CHECKPOINT = {
    "objective": "make the build green", "completed": ["ran the build"], "current_state": "build fails",
    "important_files": [{"path": "build.sh", "reason": "the failing step"}],
    "failed_attempts": ["build.sh: disk on fire"], "decisions": ["keep bash"], "running_processes": [],
    "next_steps": ["fix the disk"],
}
ERROR = "E_BOOM: disk on fire at sector 7"


def checkpoint_reply():
    return reply(text("```yaml\n" + yaml.safe_dump(CHECKPOINT, sort_keys=False) + "```"), usage=SMALL)


def first_session(api, workspace):
    api.script(reply(tool_use("bash", {"command": f"echo '{ERROR}' >&2; exit 3"}), usage=SMALL),
               reply(text("it failed"), usage=BIG))
    done = run_khaelor(["-p", "build it", "--permission-mode", "bypass"], workspace, api)
    assert done.returncode == 0, done.stderr


def all_blocks(request):
    return [b for m in request.body["messages"] for b in m["content"]]


def test_parse_checkpoint_accepts_exact_keys_and_rejects_the_rest():
    assert parse_checkpoint("```yaml\n" + yaml.safe_dump(CHECKPOINT) + "```")["objective"] == "make the build green"
    with pytest.raises(ValueError, match="missing next_steps"):
        parse_checkpoint(yaml.safe_dump({k: v for k, v in CHECKPOINT.items() if k != "next_steps"}))
    with pytest.raises(ValueError, match="unexpected extra"):
        parse_checkpoint(yaml.safe_dump({**CHECKPOINT, "extra": 1}))
    with pytest.raises(ValueError, match="must be a list"):
        parse_checkpoint(yaml.safe_dump({**CHECKPOINT, "completed": "all"}))
    with pytest.raises(ValueError, match="not valid YAML"):
        parse_checkpoint("objective: [unclosed")
    with pytest.raises(ValueError, match="path and a reason"):
        parse_checkpoint(yaml.safe_dump({**CHECKPOINT, "important_files": ["x"]}))


def test_auto_compaction_when_usage_crosses_the_threshold(fake_api, workspace, khaelor_home):
    first_session(fake_api, workspace)
    fake_api.script(checkpoint_reply(), reply(text("on it"), usage=SMALL))
    done = run_khaelor(["-p", "-c", "next step", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    compact_request, turn_request = fake_api.message_requests[-2:]
    assert "YAML document with exactly these top-level keys" in json.dumps(compact_request.body["messages"][-1])
    [message] = turn_request.body["messages"]
    checkpoint_text = message["content"][0]["text"]
    for key in CHECKPOINT_KEYS:
        assert f"{key}:" in checkpoint_text
    assert ERROR in checkpoint_text
    assert message["content"][-1]["text"] == "next step"
    assert not [b for b in all_blocks(turn_request) if b["type"] in ("tool_result", "tool_use")]
    result = json.loads(done.stdout)
    assert result["cost"]["by_operation"]["compaction"]["requests"] == 1
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    [entry] = [r for r in read_log(log).records if r["type"] == "entry" and r["kind"] == "compaction"]
    assert entry["checkpoint"] == CHECKPOINT and entry["evidence"]["errors"]


def test_compacted_context_survives_resume(fake_api, workspace):
    first_session(fake_api, workspace)
    fake_api.script(checkpoint_reply(), reply(text("on it"), usage=SMALL), reply(text("again"), usage=SMALL))
    assert run_khaelor(["-p", "-c", "next step"], workspace, fake_api).returncode == 0
    assert run_khaelor(["-p", "-c", "and then"], workspace, fake_api).returncode == 0
    roles = [m["role"] for m in fake_api.message_requests[-1].body["messages"]]
    assert roles == ["user", "assistant", "user"]


def test_invalid_checkpoint_is_retried_once_then_nothing_is_compacted(fake_api, workspace):
    first_session(fake_api, workspace)
    fake_api.script(reply(text("objective: [oops"), usage=SMALL), reply(text("no yaml here"), usage=SMALL),
                    reply(text("proceeding"), usage=SMALL))
    done = run_khaelor(["-p", "-c", "next"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert "compaction failed: the checkpoint was invalid twice" in done.stderr
    retry = fake_api.message_requests[-2].body["messages"][-1]["content"][-1]["text"]
    assert "Your previous checkpoint was rejected" in retry
    turn = fake_api.message_requests[-1]
    assert any(b["type"] == "tool_result" for b in all_blocks(turn))


def test_context_window_exceeded_compacts_and_retries_once(fake_api, workspace):
    first_session(fake_api, workspace)
    fake_api.script(reply(text(""), stop_reason="model_context_window_exceeded", usage=SMALL), checkpoint_reply(),
                    reply(text("fits now"), usage=SMALL))
    done = run_khaelor(["-p", "-c", "go", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "fits now"


def test_max_cost_stops_before_the_next_request(fake_api, workspace):
    costly = {"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
              "output_tokens": 200_000}  # $2.00 at $10 per million
    fake_api.script(reply(tool_use("ls", {}), usage=costly), reply(text("unreachable")))
    done = run_khaelor(["-p", "look", "--max-cost", "1.5", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "max_cost" and "cost ceiling $1.5000 reached" in result["result"]
    assert len(fake_api.message_requests) == 1 and fake_api.pending() == 1


def test_uncertain_usage_refuses_calls_under_a_ceiling(fake_api, workspace):
    fake_api.script(reply(text("cut"), cut_after=4), reply(text("whole"), usage=SMALL))
    assert run_khaelor(["-p", "hi"], workspace, fake_api).returncode == 0
    sent = len(fake_api.message_requests)
    done = run_khaelor(["-p", "-c", "more", "--max-cost", "100", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    assert "unknown usage" in json.loads(done.stdout)["result"]
    assert len(fake_api.message_requests) == sent


def test_unpriced_model_refuses_calls_under_a_ceiling(fake_api, workspace):
    done = run_khaelor(["-p", "hi", "--model", "house-model-1", "--max-cost", "1", "--output-format", "json"],
                       workspace, fake_api)
    assert done.returncode == 1
    assert "no price is known for house-model-1" in json.loads(done.stdout)["result"]
    assert not fake_api.message_requests


def test_cost_agrees_between_json_and_the_repl(fake_api, workspace, khaelor_home):
    usage = {"input_tokens": 1234, "cache_read_input_tokens": 5678, "cache_creation_input_tokens": 910,
             "output_tokens": 1112}
    fake_api.script(reply(text("priced"), usage=usage))
    done = run_khaelor(["-p", "hi", "--output-format", "json"], workspace, fake_api)
    result = json.loads(done.stdout)
    nanos = 1234 * 2000 + 5678 * 100 + 910 * 2500 + 1112 * 10000
    assert result["cost"]["total"]["nanos"] == nanos and result["cost_usd"] == nanos / 1e9
    assert abs(result["cost"]["cache_hit_rate"] - 5678 / (1234 + 5678 + 910)) < 1e-12
    repl = run_khaelor([], workspace, fake_api, input="/resume\n/cost\n")
    assert f"total        ${nanos / 1e9:.4f}" in repl.stdout
    assert "cache hits   72.6% of prompt tokens read from cache" in repl.stdout


def test_context_shows_every_budget_line(fake_api, workspace):
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    fake_api.script(reply(text("hello"), usage=SMALL))
    assert run_khaelor(["-p", "hi"], workspace, fake_api).returncode == 0
    done = run_khaelor([], workspace, fake_api, input="/resume\n/context\n")
    lines = done.stdout.splitlines()
    for label in ("system prompt", "tools", "memory files", "checkpoint + evidence", "conversation", "free"):
        [line] = [l for l in lines if l.startswith(label)]
        assert "n/a" not in line and line.split()[-2 if "(" in line else -1].replace(",", "").isdigit()


def test_context_says_na_when_counting_fails(workspace):
    with FakeAPI(api_key="the-right-key") as api:
        done = run_khaelor([], workspace, api, input="/context\n")
    lines = [l for l in done.stdout.splitlines() if l.startswith(("tools", "system prompt", "free"))]
    assert len(lines) == 3 and all(l.rstrip().endswith("n/a") for l in lines)


def test_cost_agrees_between_print_json_and_sessions_inspect(fake_api, workspace):
    usage = {"input_tokens": 321, "cache_read_input_tokens": 654, "cache_creation_input_tokens": 987,
             "output_tokens": 123}
    fake_api.script(reply(text("one"), usage=usage), reply(text("cut"), cut_after=4), reply(text("two"), usage=usage))
    first = json.loads(run_khaelor(["-p", "a", "--output-format", "json"], workspace, fake_api).stdout)
    second = json.loads(run_khaelor(["-p", "-c", "b", "--output-format", "json"], workspace, fake_api).stdout)
    inspect = run_khaelor(["sessions", "inspect", second["session_id"], "--json"], workspace, fake_api)
    assert inspect.returncode == 0, inspect.stderr
    report = json.loads(inspect.stdout)
    nanos = 2 * (321 * 2000 + 654 * 100 + 987 * 2500 + 123 * 10000)
    assert second["cost"]["total"]["nanos"] == nanos == report["usage"]["total"]["nanos"]
    assert second["cost"] == report["usage"]
    assert second["usage_uncertain_attempts"] == 1 and first["usage_uncertain_attempts"] == 0
    repl = run_khaelor([], workspace, fake_api, input="/resume\n/cost\n")
    assert f"total        ${nanos / 1e9:.4f} known subtotal — 1 uncertain attempt(s)" in repl.stdout
