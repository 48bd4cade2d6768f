"""The REPL in process: prompt_toolkit pipe input in, transcript out, the real SDK against the fake API."""

import io
import json
import time

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from khaelor import metadata
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


def test_sessions_picker_trashes_after_naming_it_and_esc_keeps_it(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    transcript(make_env(workspace, khaelor_home, fake_api), "doomed\r")
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/sessions\rx")
    assert log.exists()
    # Ctrl-X, Delete and x each ask; Esc cancels each; a last Esc leaves the picker.
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/sessions\r\x18\x1b\x1b[3~\x1bx\x1b\x1b/quit\r")
    assert log.exists() and "trash" not in out
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/sessions\r\x1b[3~\r")
    assert not log.exists() and (log.parent / ".trash" / log.name).exists()
    assert f"{log.stem} moved to the trash (khaelor sessions restore {log.stem} brings it back)" in out


def test_sessions_picker_reports_a_session_in_use_and_keeps_it(fake_api, workspace, khaelor_home):
    from khaelor.journal import exclusive

    fake_api.script(reply(text("one")))
    transcript(make_env(workspace, khaelor_home, fake_api), "busy\r")
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    with exclusive(log):
        out, err, _ = transcript(make_env(workspace, khaelor_home, fake_api), "/sessions\r\x18\r\x1b/quit\r")
    assert log.exists() and f"error: session {log.stem} is in use by pid" in err and "moved" not in out


def test_sessions_picker_renames_in_its_own_line_and_keeps_browsing(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    transcript(make_env(workspace, khaelor_home, fake_api), "name me\r")
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    keys = "/sessions\r\x12\x1br\x7fbuild  fix\r\x12\x1b\x1b/quit\r"
    out, err, _ = transcript(make_env(workspace, khaelor_home, fake_api), keys)
    assert f"{log.stem} named 'build fix'" in out, err
    assert metadata.load(log) == {"name": "build fix", "tags": []}
    assert [r for r in read_log(log).records if r["type"] == "rename"][-1]["name"] == "build fix"


def test_sessions_picker_renames_the_current_session_and_never_trashes_it(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    out, err, _ = transcript(make_env(workspace, khaelor_home, fake_api),
                             "hello\r/sessions\r\x18\x1b[3~x\x12kept\r\x1b/quit\r")
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    assert log.exists() and "trash" not in out + err
    assert "session named 'kept'" in out and metadata.load(log)["name"] == "kept"


def test_sessions_picker_tab_reaches_other_workspaces(fake_api, workspace, khaelor_home, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fake_api.script(reply(text("here")), reply(text("there")))
    transcript(make_env(workspace, khaelor_home, fake_api), "local work\r")
    transcript(make_env(elsewhere, khaelor_home, fake_api), "remote work\r")
    remote = next(log for log in khaelor_home.glob("sessions/*/*.jsonl") if metadata.title(log) == "remote work")
    keys = "/sessions\r\t/remote\x12far\r\x1b\x1b/quit\r"
    out, err, _ = transcript(make_env(workspace, khaelor_home, fake_api), keys)
    assert f"{remote.stem} named 'far'" in out, err


def test_sessions_without_a_terminal_lists_them(fake_api, workspace, khaelor_home):
    env = make_env(workspace, khaelor_home, fake_api)
    repl = Repl(env, Options(), Output(env.stdout, env.stderr, color=False), PlainReader(io.StringIO("/sessions\n")))
    repl.run()
    assert "no sessions in this workspace yet" in env.stdout.getvalue()
    fake_api.script(reply(text("one")))
    transcript(make_env(workspace, khaelor_home, fake_api), "list me\r")
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    env = make_env(workspace, khaelor_home, fake_api)
    repl = Repl(env, Options(), Output(env.stdout, env.stderr, color=False), PlainReader(io.StringIO("/sessions\n")))
    repl.run()
    [row] = [line for line in env.stdout.getvalue().splitlines() if log.stem in line]
    assert "2 msgs" in row and "list me" in row and ("$" in row or "n/a" in row)
    assert repl.choose_session("fork") is None


def test_choose_session_returns_the_id_picked_with_enter(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")))
    transcript(make_env(workspace, khaelor_home, fake_api), "first session\r/new\rsecond session\r")
    first, second = sorted(khaelor_home.glob("sessions/*/*.jsonl"))

    def choose(keys: str) -> str | None:
        env = make_env(workspace, khaelor_home, fake_api)
        with create_pipe_input() as pipe:
            repl = Repl(env, Options(), Output(env.stdout, env.stderr, color=False), None)
            repl.reader = ToolkitReader(None, repl.words, repl.toolbar, pt_input=pipe, pt_output=DummyOutput())
            pipe.send_text(keys)
            pipe.close()
            return repl.choose_session("fork")

    assert choose("\x1b[B\r") == first.stem
    assert choose("\r") == second.stem
    assert choose("n\x1bx") is None
    assert choose("\x12renamed\r\r") == second.stem
    assert metadata.load(second)["name"] == "renamed"


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
