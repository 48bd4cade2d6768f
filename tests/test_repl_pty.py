"""The REPL end to end in a real pseudo-terminal against the fake Messages API."""

import time

import pytest

from khaelor.journal import read_log
from tests.conftest import run_khaelor
from tests.fakeapi import reply, text, tool_use
from tests.pty_session import PtySession

HOSTILE = ["\x1b]52;c;cGF3bmVk\x07", "\x1b]8;;http://evil\x07", "\x1b[2J", "\x1b]0;title\x07"]


@pytest.fixture
def terminal(request):
    sessions = []

    def start(*args, **kwargs):
        session = PtySession(*args, **kwargs)
        sessions.append(session)
        return session

    yield start
    for session in sessions:
        session.close()


def the_records(home):
    [log] = sorted(home.glob("sessions/*/*.jsonl"))
    return read_log(log).records


def test_start_help_turn_cancel_and_ctrl_d(terminal, fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("Hello from the model.")), reply(tool_use("bash", {"command": "touch from_pty"})),
                    reply(text("made it")), reply(text("this never ends"), hold_after=3), reply(text("after cancel")))
    term = terminal([], workspace, fake_api)
    term.read_until("khaelor 0.1.0")
    term.read_until("❯")
    term.send("/he\r")
    term.read_until("/help [COMMAND]")
    term.send("/hlep\r")
    term.read_until("did you mean /help?")
    term.send("say hello\r")
    term.read_until("Hello from the model.")
    term.read_until("❯")
    term.send("make a file\r")
    term.read_until("? bash wants: touch from_pty")
    term.read_until("[D]eny")
    term.send("o\r")
    term.read_until("made it")
    assert (workspace / "from_pty").exists()
    term.read_until("❯")
    term.send("talk forever\r")
    assert fake_api.held.wait(30)
    term.interrupt()
    term.read_until("cancelled")
    term.read_until("❯")
    fake_api.release()
    term.send("again\r")
    term.read_until("after cancel")
    term.read_until("❯")
    term.send(b"\x04")
    assert term.wait() == 0
    kinds = [r["type"] for r in the_records(khaelor_home)]
    assert "cancel" in kinds and kinds[-1] == "close"


def test_no_escape_sequence_from_model_or_tool_reaches_the_terminal(terminal, fake_api, workspace):
    hostile = "".join(HOSTILE)
    fake_api.script(reply(text(f"model says {hostile} end"),
                          tool_use("bash", {"command": "printf '" + hostile.replace("\x1b", "\\033").replace("\x07", "\\007") + "tool done\\n'"})),
                    reply(text("finished")))
    term = terminal(["--allow", "bash"], workspace, fake_api)
    term.read_until("❯")
    term.send("go\r")
    seen = term.read_until("finished")
    term.read_until("❯")
    term.send(b"\x04")
    assert term.wait() == 0
    assert b"tool done" in seen and b"model says" in seen
    for sequence in HOSTILE:
        assert sequence.encode() not in term.output
    assert b"\x1b]52" not in term.output and b"\x1b]8;" not in term.output and b"http://evil" in term.output


def test_window_title_is_set_on_a_terminal(terminal, fake_api, workspace):
    fake_api.script(reply(text("ok")))
    term = terminal([], workspace, fake_api)
    term.read_until("❯")
    term.send("hi\r")
    term.read_until("ok")
    term.send("/rename release notes\r")
    term.read_until("\x1b]0;khaelor · release notes\x07")
    term.read_until("❯")
    term.send(b"\x04")
    assert term.wait() == 0


def test_interrupted_line_after_sigkill_not_after_clean_exit(terminal, fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("first")), reply(text("stuck"), hold_after=3))
    term = terminal([], workspace, fake_api)
    term.read_until("❯")
    term.send("one\r")
    term.read_until("first")
    term.send("two\r")
    assert fake_api.held.wait(30)
    term.close()
    fake_api.release()
    again = run_khaelor([], workspace, fake_api, input="")
    assert "Interrupted session from just now · /resume to continue" in again.stdout
    clean = run_khaelor([], workspace, fake_api, input="/resume\n")
    assert clean.returncode == 0, clean.stderr
    final = run_khaelor([], workspace, fake_api, input="")
    assert "Interrupted session" not in final.stdout


def test_print_mode_on_a_terminal_strips_escape_sequences(terminal, fake_api, workspace):
    fake_api.script(reply(text("answer " + "".join(HOSTILE) + " end")))
    term = terminal(["-p", "hi"], workspace, fake_api)
    term.read_until("end")
    assert term.wait() == 0
    assert b"\x1b" not in term.output


def test_goal_typed_during_a_turn_applies_at_once_the_rest_waits_and_ctrl_c_still_cancels(
        terminal, fake_api, workspace):
    fake_api.script(reply(text("planning the release"), hold_after=4), reply(text("queued answer")),
                    reply(text("draft answer")), reply(text("a long story"), hold_after=4), reply(text("after cancel")))
    term = terminal([], workspace, fake_api)
    term.read_until("❯")
    term.send("/goal ship the release\r")
    assert fake_api.held.wait(30)
    term.read_until("planning")
    term.send("/goal pause\r")
    term.read_until("goal paused (1/10 continuations): ship the release — paused by you")
    assert fake_api.held.is_set(), "the turn was still running"
    term.send("what next?\rdraft wor")
    time.sleep(0.5)
    fake_api.release()
    term.read_until("he release")
    term.read_until("❯ what next?")
    term.read_until("queued answer")
    term.read_until("❯ draft wor")
    term.send("ds\r")
    term.read_until("draft answer")
    term.read_until("❯")
    term.send("tell a story\r")
    assert fake_api.held.wait(30)
    term.send("/goal status\r")
    term.read_until("goal paused (1/10 continuations)")
    term.interrupt()
    term.read_until("cancelled")
    term.read_until("❯")
    fake_api.release()
    term.send("again\r")
    term.read_until("after cancel")
    term.read_until("❯")
    term.send(b"\x04")
    assert term.wait() == 0
    asked = [r.body["messages"][-1]["content"][0]["text"] for r in fake_api.message_requests]
    assert len(asked) == 5 and "Continue working toward the session goal" in asked[0]
    assert asked[1:4] == ["what next?", "draft words", "tell a story"]
