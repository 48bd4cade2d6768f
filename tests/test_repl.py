"""The REPL in process: prompt_toolkit pipe input in, transcript out, the real SDK against the fake API."""

import io
import json
import time

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from khaelor.env import Env
from khaelor.journal import Journal, read_log
from khaelor.output import Output
from khaelor.reader import PlainReader, ToolkitReader
from khaelor.repl import Repl, interrupted_line, relative_age
from khaelor.runtime import Options
from tests.conftest import TEST_KEY
from tests.fakeapi import reply, text, tool_use


def make_env(workspace, home, api=None, **extra):
    environ = {"KHAELOR_HOME": str(home), "HOME": str(home.parent)}
    if api is not None:
        environ.update(ANTHROPIC_BASE_URL=api.base_url, ANTHROPIC_API_KEY=TEST_KEY)
    environ.update(extra)
    return Env(stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO(), environ=environ, cwd=workspace)


def transcript(env, keys: str, options: Options | None = None) -> tuple[str, str, Repl]:
    """Type `keys` into a REPL reading through prompt_toolkit; return (stdout, stderr, repl)."""
    out = Output(env.stdout, env.stderr, color=False)
    with create_pipe_input() as pipe:
        repl = Repl(env, options or Options(), out, None)
        repl.reader = ToolkitReader(None, repl.words, repl.toolbar, pt_input=pipe, pt_output=DummyOutput())
        pipe.send_text(keys)
        pipe.close()
        status = repl.run()
    assert status == 0
    return env.stdout.getvalue(), env.stderr.getvalue(), repl


def records(home):
    [log] = sorted(home.glob("sessions/*/*.jsonl"))
    return read_log(log).records


def test_help_prefix_and_did_you_mean(workspace, khaelor_home):
    out, err, _ = transcript(make_env(workspace, khaelor_home), "/help\r/he\r/hlep\r/re\r")
    assert out.count("/help [COMMAND] — list the commands") == 2
    assert "unknown command /hlep — did you mean /help?" in err
    assert "/re is ambiguous: /rename, /resume" in err


def test_help_for_one_command_shows_its_docstring(workspace, khaelor_home):
    out, _, _ = transcript(make_env(workspace, khaelor_home), "/help tag\r")
    assert "/tag TAG... — tag the current session" in out


def test_banner_without_credentials_explains_and_commands_still_work(workspace, khaelor_home):
    out, err, _ = transcript(make_env(workspace, khaelor_home), "/model\rhello there\r")
    assert "no credentials — set ANTHROPIC_API_KEY" in out.splitlines()[0]
    assert "claude-sonnet-5-5" in out.splitlines()[1]
    assert "error: no Anthropic credentials" in err
    assert not list(khaelor_home.glob("sessions/*/*.jsonl"))


def test_empty_lines_do_nothing_and_eof_leaves_without_a_session(workspace, khaelor_home):
    out, err, _ = transcript(make_env(workspace, khaelor_home), "\r   \r")
    assert err == "" and len(out.splitlines()) == 1
    assert not list(khaelor_home.glob("sessions/*/*.jsonl"))


def test_a_turn_with_tool_calls_streams_text_and_shows_compact_lines(fake_api, workspace, khaelor_home):
    (workspace / "notes.txt").write_text("one\n")
    fake_api.script(
        reply(text("Looking."), tool_use("read", {"path": "notes.txt"})),
        reply(tool_use("bash", {"command": "echo hi"})),
        reply(text("All \x1b[2Jdone.")),
    )
    env = make_env(workspace, khaelor_home, fake_api)
    out, err, repl = transcript(env, "read my notes\r", Options(allow=("bash",)))
    lines = out.splitlines()
    assert "Looking." in lines
    assert "● read  notes.txt" in lines and "● bash  echo hi" in lines
    assert any(line.startswith("  ✓ ") and line.endswith("s") for line in lines)
    assert "    hi" in lines
    assert "All done." in lines and "\x1b" not in out
    kinds = [r["type"] for r in records(khaelor_home)]
    assert kinds[-2:] == ["turn_end", "close"]
    assert "claude-sonnet-5-5 · context" in repl.toolbar()


def test_denied_call_is_shown_with_its_reason(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "rm -rf /"})), reply(text("ok")))
    env = make_env(workspace, khaelor_home, fake_api)
    out, _, _ = transcript(env, "clean up\r", Options(deny=("bash",)))
    assert "✗ bash  rm -rf / — denied: deny rule 'bash' (cli)" in out


def test_edit_shows_a_diff(fake_api, workspace, khaelor_home):
    (workspace / "f.py").write_text("x = 1\n")
    fake_api.script(reply(tool_use("read", {"path": "f.py"})),
                    reply(tool_use("edit", {"path": "f.py", "old_string": "x = 1", "new_string": "x = 2"})),
                    reply(text("changed")))
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "bump x\r",
                           Options(permission_mode="accept-edits"))
    assert "-x = 1" in out.splitlines() and "+x = 2" in out.splitlines()


def test_status_line_context_levels_from_real_usage(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("a"), usage={"input_tokens": 10, "cache_read_input_tokens": 0,
                                            "cache_creation_input_tokens": 0, "output_tokens": 5}),
                    reply(text("b"), usage={"input_tokens": 800_000, "cache_read_input_tokens": 20_000,
                                            "cache_creation_input_tokens": 0, "output_tokens": 1_000}),
                    reply(text("c"), usage={"input_tokens": 900_000, "cache_read_input_tokens": 5_000,
                                            "cache_creation_input_tokens": 0, "output_tokens": 1_000}))
    env = make_env(workspace, khaelor_home, fake_api)
    out = Output(env.stdout, env.stderr)
    repl = Repl(env, Options(), out, PlainReader(io.StringIO("")))
    assert repl.status().text().startswith("claude-sonnet-5-5 · context n/a · $0.0000")
    repl.turn("one")
    assert repl.status().level() == "ok" and "context 0%" in repl.status().text()
    repl.turn("two")
    assert repl.status().level() == "suggest" and "context 82% · /compact suggested" in repl.status().text()
    repl.turn("three")
    assert repl.status().level() == "urgent" and "context 91% · CONTEXT NEARLY FULL" in repl.status().text()
    repl._detach()


def test_rename_tag_and_resume(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("first")), reply(text("second")))
    env = make_env(workspace, khaelor_home, fake_api)
    out, _, _ = transcript(env, "hello\r/rename build fix\r/tag ci urgent\r/tag -ci\r/new\r/resume\rmore\r")
    assert "session named 'build fix'" in out and "tags: ci, urgent" in out and "tags: urgent" in out
    assert "resumed " in out and "(build fix)" in out
    kinds = [r["type"] for r in records(khaelor_home)]
    assert kinds.count("close") == 2 and "rename" in kinds and "tag" in kinds
    sent = fake_api.message_requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]


def test_clear_starts_a_new_branch_root(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("first")), reply(text("second")))
    transcript(make_env(workspace, khaelor_home, fake_api), "hello\r/clear\ragain\r")
    assert len(fake_api.message_requests[-1].body["messages"]) == 1


def test_model_switch_applies_to_the_next_request(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("first")), reply(text("second")))
    transcript(make_env(workspace, khaelor_home, fake_api), "hello\r/model claude-opus-5-5\ragain\r")
    assert [r.body["model"] for r in fake_api.message_requests] == ["claude-sonnet-5-5", "claude-opus-5-5"]


def test_interrupted_line_only_after_an_unclean_end(tmp_path):
    log = tmp_path / "20261129T000000-abcdef.jsonl"
    journal = Journal.create(log, {"session_id": "x", "workspace": "/w"}, lambda: 1_000.0)
    journal.close()
    assert interrupted_line(log, 1_000.0 + 12 * 60) == "Interrupted session from 12 min ago · /resume to continue"
    journal, _ = Journal.open(log, lambda: 2_000.0)
    journal.append("close")
    journal.close()
    assert interrupted_line(log, 3_000.0) is None
    assert interrupted_line(None, 0) is None


def test_relative_age():
    assert relative_age(5) == "just now" and relative_age(3 * 3600 + 5) == "3 h ago" and relative_age(2 * 86400) == "2 d ago"


def test_piped_stdin_without_print_runs_the_repl_line_by_line(fake_api, workspace, khaelor_home):
    from tests.conftest import run_khaelor

    fake_api.script(reply(text("hi back")))
    done = run_khaelor([], workspace, fake_api, input="hello\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "hi back" in done.stdout.splitlines()
    assert [r["type"] for r in records(khaelor_home)][-1] == "close"


def test_picker_state_moves_filters_and_chooses():
    from khaelor.picker import Item, PickerState

    state = PickerState([Item("s1", "fix login bug", "1 h ago"), Item("s2", "write docs", "2 h ago"),
                         Item("s3", "login tests", "3 d ago")])
    state.move(5)
    assert state.index == 2
    state.type("login")
    assert [i.session_id for i in state.shown] == ["s1", "s3"] and state.index == 0
    state.move(1)
    state.choose("delete")
    assert state.result == ("delete", "s3")
    state.type(" nothing")
    state.choose("resume")
    assert state.result == ("delete", "s3")
    assert state.lines()[0][1] == "  (no session matches)"


def test_sessions_picker_resumes_the_selected_session(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")), reply(text("three")))
    env = make_env(workspace, khaelor_home, fake_api)
    transcript(env, "first session\r/new\rsecond session\r")
    first, second = sorted(khaelor_home.glob("sessions/*/*.jsonl"))
    env = make_env(workspace, khaelor_home, fake_api)
    out, err, _ = transcript(env, "/sessions\r\x1b[B\rand more\r")
    assert f"resumed {first.stem}" in out, err
    sent = fake_api.message_requests[-1].body["messages"]
    assert sent[0]["content"][0]["text"] == "first session"


def test_sessions_picker_deletes_to_trash_after_confirmation(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    transcript(make_env(workspace, khaelor_home, fake_api), "doomed\r")
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/sessions\rx")
    assert log.exists()
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/sessions\rxy\r")
    assert not log.exists() and (log.parent / ".trash" / log.name).exists()
    assert "moved to the trash" in out


def test_continue_flag_resumes_at_start(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")))
    transcript(make_env(workspace, khaelor_home, fake_api), "hello\r")
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "again\r", Options(continue_latest=True))
    assert "resumed " in out
    assert len(fake_api.message_requests[-1].body["messages"]) == 3


def test_permission_prompt_once_session_and_deny(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "touch one"})),
                    reply(tool_use("bash", {"command": "touch two"})),
                    reply(tool_use("bash", {"command": "touch two"})),
                    reply(tool_use("bash", {"command": "touch three"})),
                    reply(text("done")))
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "make files\ro\rs\rd\rnot that one\r")
    assert "? bash wants: touch one" in out
    assert (workspace / "one").exists() and (workspace / "two").exists() and not (workspace / "three").exists()
    assert out.count("? bash wants: touch two") == 1
    told = fake_api.message_requests[-1].body["messages"][-1]["content"][0]
    assert told["is_error"] and "not that one" in told["content"]
    decisions = [r for r in records(khaelor_home) if r["type"] == "permission"]
    assert [d["decision"] for d in decisions] == ["allow", "allow", "allow", "deny"]


def test_permission_prompt_eof_denies(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "touch x"})), reply(text("ok")))
    transcript(make_env(workspace, khaelor_home, fake_api), "go\r")
    assert not (workspace / "x").exists()


def test_goal_runs_until_complete(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("step one")), reply(text("step two")), reply(text("step three")),
                    reply(text("all done\nGOAL_COMPLETE")))
    env = make_env(workspace, khaelor_home, fake_api)
    out, err, repl = transcript(env, "/goal make the tests pass\r")
    continuations = [r for r in fake_api.message_requests
                     if "Continue working toward the session goal" in json.dumps(r.body["messages"][-1])]
    assert len(continuations) == 4
    assert "goal complete" in out
    assert repl.toolbar().endswith("goal complete 4/10")
    operations = [r["operation"] for r in records(khaelor_home) if r["type"] == "usage"]
    assert operations == ["goal"] * 4


def test_goal_blocked_and_budget(fake_api, workspace, khaelor_home):
    (khaelor_home).mkdir(parents=True, exist_ok=True)
    (khaelor_home / "config.yaml").write_text("goal: {budget: 2, grace_seconds: 0}\n")
    fake_api.script(reply(text("GOAL_BLOCKED: missing credentials")))
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/goal deploy\r")
    assert "goal blocked (1/2 continuations): deploy — missing credentials" in out
    fake_api.script(reply(text("a")), reply(text("b")), reply(text("never")))
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/new\r/goal refactor\r")
    assert "the budget of 2 continuations is spent" in out and fake_api.pending() == 1


def test_goal_store_unwritable_refuses(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("hi")))
    out, err, _ = transcript(make_env(workspace, khaelor_home, fake_api), "hello\r")
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    (log.parent / ".goals").write_text("not a folder")
    out, err, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/resume\r/goal anything\r")
    assert "the goal store" in err and "Not a directory" in err
    assert len(fake_api.message_requests) == 1


def test_session_rules_added_listed_and_removed(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "touch a"})), reply(text("ok")),
                    reply(tool_use("bash", {"command": "touch b"})), reply(text("ok")))
    keys = "/permissions allow bash: touch a\r/permissions\rgo\r/permissions remove bash: touch a\r" \
           "/permissions allow ???\rgo again\r"
    out, err, _ = transcript(make_env(workspace, khaelor_home, fake_api), keys)
    assert "session rule added: allow bash: touch a" in out and "  allow  bash: touch a  (session)" in out
    assert (workspace / "a").exists() and not (workspace / "b").exists()
    assert "session rule removed" in out and "not a valid rule" in err
    assert [r["action"] for r in records(khaelor_home) if r["type"] == "session_rule"] == ["add", "remove"]
