"""Print mode end to end: the real CLI in a subprocess, the real SDK, the fake Messages API."""

import json
from pathlib import Path

from khaelor.journal import read_log
from tests.conftest import run_khaelor
from tests.fakeapi import reply, text, tool_use

USAGE = {"input_tokens": 7, "output_tokens": 11, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}


def session_logs(home: Path) -> list[Path]:
    return sorted(home.glob("sessions/*/*.jsonl"))


def strip_cache(value):
    if isinstance(value, dict):
        return {k: strip_cache(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache(v) for v in value]
    return value


def script_hello_task(api):
    api.script(
        reply(tool_use("ls", {"path": "."}), usage=USAGE),
        reply(text("Creating it."), tool_use("write", {"path": "hello.py", "content": "print('helo')\n"}), usage=USAGE),
        reply(tool_use("read", {"path": "hello.py"}), usage=USAGE),
        reply(tool_use("edit", {"path": "hello.py", "old_string": "helo", "new_string": "hello"}), usage=USAGE),
        reply(tool_use("bash", {"command": "python3 hello.py"}), usage=USAGE),
        reply(text("hello.py now prints hello."), usage=USAGE),
    )


def test_multi_step_task_end_to_end(fake_api, workspace, khaelor_home):
    (workspace / "README.md").write_text("a repo\n")
    script_hello_task(fake_api)
    done = run_khaelor(["-p", "make hello.py print hello", "--permission-mode", "bypass", "--output-format", "json"],
                       workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert (workspace / "hello.py").read_text() == "print('hello')\n"
    result = json.loads(done.stdout)
    assert set(result) >= {"result", "session_id", "num_turns", "usage", "cost_usd", "is_error", "stop_reason",
                           "permission_denials"}
    assert result["result"] == "hello.py now prints hello."
    assert result["num_turns"] == 6 and result["is_error"] is False and result["stop_reason"] == "end_turn"
    assert result["usage"] == {"input_tokens": 42, "output_tokens": 66, "cache_read_tokens": 600, "cache_write_tokens": 120}
    assert result["permission_denials"] == []
    requests = fake_api.message_requests
    assert len(requests) == 6
    listing = requests[1].body["messages"][-1]["content"][0]
    assert listing["type"] == "tool_result" and "README.md" in listing["content"]
    ran = requests[5].body["messages"][-1]["content"][0]
    assert ran["tool_use_id"] and "hello" in ran["content"] and not ran.get("is_error")
    assert done.stderr == ""


def test_requests_share_a_byte_identical_cached_prefix(fake_api, workspace):
    script_hello_task(fake_api)
    done = run_khaelor(["-p", "go", "--permission-mode", "bypass"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    prefixes = set()
    for request in fake_api.message_requests:
        body = request.body
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        prefixes.add(json.dumps([body["tools"], body["system"]], sort_keys=False))
        raw = request.raw
        start = raw.index(b'"tools"') if b'"tools"' in raw else 0
        assert b'"system"' in raw and start >= 0
    assert len(prefixes) == 1
    later = fake_api.message_requests[-1]
    assert later.body["messages"][:2] != [] and later.body["model"] == fake_api.message_requests[0].body["model"]


def test_continue_sends_the_whole_previous_conversation(fake_api, workspace, khaelor_home):
    script_hello_task(fake_api)
    first = run_khaelor(["-p", "go", "--permission-mode", "bypass"], workspace, fake_api)
    assert first.returncode == 0, first.stderr
    last = fake_api.message_requests[-1].body
    fake_api.script(reply(text("Second answer."), usage=USAGE))
    second = run_khaelor(["-p", "-c", "what next?", "--output-format", "json"], workspace, fake_api)
    assert second.returncode == 0, second.stderr
    sent = fake_api.message_requests[-1].body["messages"]
    previous = strip_cache(last["messages"]) + [{"role": "assistant", "content": [{"type": "text", "text": "hello.py now prints hello."}]}]
    assert strip_cache(sent[:-1]) == previous
    assert strip_cache(sent[-1]) == {"role": "user", "content": [{"type": "text", "text": "what next?"}]}
    [log] = session_logs(khaelor_home)
    assert json.loads(second.stdout)["session_id"] == log.stem == read_log(log).records[0]["session_id"]


def test_resume_by_unique_prefix(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")))
    assert run_khaelor(["-p", "first"], workspace, fake_api).returncode == 0
    session_id = session_logs(khaelor_home)[0].stem
    done = run_khaelor(["-p", "-r", session_id[:17], "again", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["session_id"] == session_id
    assert len(fake_api.message_requests[-1].body["messages"]) == 3


def test_unknown_resume_prefix_is_a_usage_error(fake_api, workspace):
    done = run_khaelor(["-p", "-r", "1999", "hi"], workspace, fake_api)
    assert done.returncode == 2
    assert done.stderr.startswith("khaelor: error: no session matches '1999'")
    assert "Traceback" not in done.stderr


def test_piped_stdin_is_the_prompt(fake_api, workspace):
    fake_api.script(reply(text("ok")))
    done = run_khaelor(["-p", "summarize:"], workspace, fake_api, input="line one\nline two\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"
    sent = fake_api.message_requests[0].body["messages"][0]["content"][0]["text"]
    assert sent == "summarize:\n\nline one\nline two"


def test_stream_json_emits_journal_events_then_the_result(fake_api, workspace):
    fake_api.script(reply(tool_use("ls", {})), reply(text("listed")))
    done = run_khaelor(["-p", "list", "--output-format", "stream-json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [event["type"] for event in events]
    assert kinds[-1] == "result" and events[-1]["result"] == "listed"
    for expected in ("entry", "request", "usage", "tool_request", "permission", "tool_start", "tool_result"):
        assert expected in kinds


def test_print_mode_denies_instead_of_asking_and_names_the_rule(fake_api, workspace):
    fake_api.script(reply(tool_use("bash", {"command": "touch pwned"})), reply(text("could not")))
    done = run_khaelor(["-p", "touch a file", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert not (workspace / "pwned").exists()
    result = json.loads(done.stdout)
    [denial] = result["permission_denials"]
    assert denial["tool"] == "bash" and denial["input"] == {"command": "touch pwned"}
    assert "--allow" in denial["reason"]
    told = fake_api.message_requests[1].body["messages"][-1]["content"][0]
    assert told["is_error"] is True and told["content"].startswith("Permission denied")


def test_allow_flag_permits_a_tool(fake_api, workspace):
    fake_api.script(reply(tool_use("bash", {"command": "touch made"})), reply(text("done")))
    done = run_khaelor(["-p", "touch", "--allow", "bash"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert (workspace / "made").exists()


def test_deny_rule_beats_bypass(fake_api, workspace):
    fake_api.script(reply(tool_use("bash", {"command": "touch made"})), reply(text("done")))
    done = run_khaelor(["-p", "touch", "--permission-mode", "bypass", "--deny", "bash"], workspace, fake_api)
    assert done.returncode == 0
    assert not (workspace / "made").exists()


def test_max_turns_stops_with_exit_1(fake_api, workspace):
    fake_api.script(reply(tool_use("ls", {})), reply(tool_use("ls", {})), reply(text("never")))
    done = run_khaelor(["-p", "loop", "--max-turns", "2", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "max_turns" and result["is_error"] is True and result["num_turns"] == 2
    assert fake_api.pending() == 1


def test_missing_credentials_is_one_line_exit_1(workspace, khaelor_home):
    done = run_khaelor(["-p", "hello"], workspace)
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == "khaelor: error: no Anthropic credentials: ANTHROPIC_API_KEY is not set"
    assert len(lines) == 2 and lines[1].startswith("khaelor: hint:")
    assert not session_logs(khaelor_home)


def test_auth_token_is_accepted(fake_api, workspace):
    fake_api.script(reply(text("hi")))
    done = run_khaelor(["-p", "hello"], workspace, fake_api, ANTHROPIC_API_KEY="", ANTHROPIC_AUTH_TOKEN="tok-123")
    assert done.returncode == 0, done.stderr
    assert fake_api.message_requests[0].headers.get("authorization") == "Bearer tok-123"


def test_api_refusal_is_one_line_exit_1(fake_api, workspace):
    from tests.fakeapi import error_response

    fake_api.script(error_response(401, "invalid x-api-key"))
    done = run_khaelor(["-p", "hello", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["is_error"] is True and "401" in result["result"]
    assert "Traceback" not in done.stderr


def test_no_prompt_is_a_usage_error(fake_api, workspace):
    done = run_khaelor(["-p"], workspace, fake_api)
    assert done.returncode == 2
    assert "no prompt" in done.stderr


def test_refusal_and_max_tokens_are_errors_not_success(fake_api, workspace):
    fake_api.script(reply(text("I can't"), stop_reason="refusal",
                          stop_details={"type": "refusal", "category": None, "explanation": "policy"}))
    done = run_khaelor(["-p", "bad", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    assert json.loads(done.stdout)["stop_reason"] == "refusal"
    fake_api.script(reply(text("partial"), tool_use("bash", {"command": "echo"}), stop_reason="max_tokens"),
                    reply(text("fine")))
    done = run_khaelor(["-p", "long", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1 and json.loads(done.stdout)["stop_reason"] == "max_tokens"
    again = run_khaelor(["-p", "-c", "continue"], workspace, fake_api)
    assert again.returncode == 0, again.stderr
    results = [b for m in fake_api.message_requests[-1].body["messages"] for b in m["content"]
               if b.get("type") == "tool_result"]
    assert results and results[-1]["is_error"] is True and "Not run" in results[-1]["content"]


def test_pause_turn_is_continued(fake_api, workspace):
    fake_api.script(reply(text("working"), stop_reason="pause_turn"), reply(text("finished")))
    done = run_khaelor(["-p", "x"], workspace, fake_api)
    assert done.returncode == 0 and done.stdout == "finished\n"
    assert fake_api.message_requests[1].body["messages"][-1]["role"] == "assistant"


def test_thinking_blocks_are_sent_back_verbatim(fake_api, workspace):
    from tests.fakeapi import redacted_thinking, thinking

    fake_api.script(reply(thinking("let me look", signature="sig-ABC123"), redacted_thinking("opaque=="),
                          tool_use("ls", {})), reply(text("seen")))
    done = run_khaelor(["-p", "look"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assistant = fake_api.message_requests[1].body["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {"type": "thinking", "thinking": "let me look", "signature": "sig-ABC123"}
    assert assistant["content"][1] == {"type": "redacted_thinking", "data": "opaque=="}


def test_memory_files_and_facts_are_in_a_system_prompt_fixed_for_the_session(fake_api, workspace):
    (workspace / "AGENTS.md").write_text("Always run `make check` before finishing.\n")
    sub = workspace / "pkg"
    sub.mkdir()
    (sub / "KHAELOR.md").write_text("Package rule: no new dependencies.\n")
    fake_api.script(reply(text("one")), reply(text("two")))
    assert run_khaelor(["-p", "first"], sub, fake_api).returncode == 0
    (workspace / "AGENTS.md").write_text("changed later\n")
    assert run_khaelor(["-p", "-c", "second"], sub, fake_api).returncode == 0
    first, second = (r.body["system"] for r in fake_api.message_requests)
    assert first == second
    system = first[0]["text"]
    assert system.index("make check") < system.index("no new dependencies")
    assert f"workspace: {sub}" in system and "changed later" not in system


def test_context_window_exceeded_is_an_error_when_compaction_cannot_help(fake_api, workspace):
    fake_api.script(reply(text("cut"), stop_reason="model_context_window_exceeded"),
                    reply(text("not a checkpoint")), reply(text("still not one")))
    done = run_khaelor(["-p", "big", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "model_context_window_exceeded" and "context window" in result["result"]
