"""Branches in one log: /tree moves and summaries, /fork, /clone, `--fork` — against the fake Messages API."""

import hashlib
import io
import json

import pytest
from khaelor import branching, goal
from khaelor.journal import read_log
from khaelor.output import Output
from khaelor.reader import PlainReader
from khaelor.repl import Repl
from khaelor.runtime import Options
from khaelor.session import SessionState
from tests.conftest import run_khaelor
from tests.fakeapi import error_response, reply, text, tool_use
from tests.test_repl import make_env, transcript


class Answers:
    """A stdin whose lines the test adds as it goes (answers to the REPL's questions)."""

    def __init__(self):
        self.lines: list[str] = []

    def readline(self) -> str:
        return self.lines.pop(0) + "\n" if self.lines else ""


def start_repl(fake_api, workspace, home) -> tuple[Repl, Answers, object]:
    env = make_env(workspace, home, fake_api)
    answers = Answers()
    repl = Repl(env, Options(), Output(env.stdout, env.stderr, color=False), PlainReader(answers))
    return repl, answers, env


def log_of(home):
    [log] = sorted(home.glob("sessions/*/*.jsonl"))
    return log


def state_of(log) -> SessionState:
    return SessionState.from_records(read_log(log).records)


def entry_with(state: SessionState, kind: str, words: str) -> str:
    [found] = [e["id"] for e in state.entries.values() if e.get("kind") == kind
               and words in json.dumps(e.get("message"))]
    return found


def texts_of(body: dict) -> list[str]:
    return [b["text"] for m in body["messages"] for b in m["content"] if b.get("type") == "text"]


def test_three_branches_via_tree_grow_the_log_only_and_resume_follows_the_head(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")), reply(text("three")), reply(text("SUMMARY-OF-THREE")),
                    reply(text("four")), reply(text("SUMMARY-ROOT")), reply(text("five")), reply(text("six")))
    repl, answers, env = start_repl(fake_api, workspace, khaelor_home)
    repl.handle("first request")
    repl.handle("second request")
    log = log_of(khaelor_home)
    prefixes = []

    def branch(line: str, *replies: str) -> None:
        data = log.read_bytes()
        prefixes.append((len(data), hashlib.sha256(data).hexdigest()))
        answers.lines.extend(replies)
        repl.handle(line)
        for size, digest in prefixes:
            assert hashlib.sha256(log.read_bytes()[:size]).hexdigest() == digest

    # 1: back to the first reply, no summary; the next request starts a second branch there.
    state = repl.runtime.session.state
    branch("/tree", entry_with(state, "assistant", "one"), "n")
    assert "head moved to claude: one" in env.stdout.getvalue()
    repl.handle("third request")
    # 2: choose "second request": the head goes before it and its text comes back to edit; summarized.
    branch("/tree", entry_with(state, "user", "second request"), "s")
    assert repl.draft == "second request"
    assert "SUMMARY-OF-THREE" in env.stdout.getvalue()  # streamed as it is written
    repl.handle("fourth request")
    # 3: the very first request: the head goes to the start; a summary with instructions.
    branch("/tree " + entry_with(state, "user", "first request"), "c", "keep the file names")
    repl.handle("fifth request")
    repl._detach()

    bodies = [r.body for r in fake_api.message_requests]
    assert texts_of(bodies[2]) == ["first request", "one", "third request"]
    summary_ask = bodies[3]["messages"][-1]["content"][0]["text"]
    assert "you: " not in summary_ask and "third request" in summary_ask and "second request" not in summary_ask
    assert texts_of(bodies[4])[:2] == ["first request", "one"]
    assert "SUMMARY-OF-THREE" in texts_of(bodies[4])[2] and texts_of(bodies[4])[3] == "fourth request"
    assert "keep the file names" in bodies[5]["messages"][-1]["content"][0]["text"]
    assert "SUMMARY-ROOT" in texts_of(bodies[6])[0] and texts_of(bodies[6])[1] == "fifth request"
    assert [r.get("operation") for r in read_log(log).records if r["type"] == "usage"].count("branch_summary") == 2

    done = run_khaelor(["-p", "-c", "sixth request"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    resumed = texts_of(fake_api.message_requests[-1].body)
    assert "SUMMARY-ROOT" in resumed[0] and resumed[1:] == ["fifth request", "five", "sixth request"]

    inspected = run_khaelor(["sessions", "inspect", log.stem, "--json"], workspace)
    report = json.loads(inspected.stdout)
    leaves = {leaf["text"]: leaf for leaf in report["leaves"]}
    assert set(leaves) == {"two", "three", "four", "six"}
    assert [t for t, leaf in leaves.items() if not leaf["on_head_branch"]] == ["two", "three", "four"]
    assert leaves["six"]["is_head"] and len(report["roots"]) == 2


def test_tree_lists_entries_marks_the_head_and_abandoned_ends(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one \x1b]52;c;aGk=\x07")), reply(text("two")), reply(text("three")))
    repl, answers, env = start_repl(fake_api, workspace, khaelor_home)
    repl.handle("first")
    repl.handle("second")
    state = repl.runtime.session.state
    answers.lines += [entry_with(state, "assistant", "one"), ""]
    repl.handle("/tree")
    repl.handle("third")
    answers.lines.append("")  # Enter keeps the head
    repl.handle("/tree")
    repl._detach()
    shown = env.stdout.getvalue()
    listing = shown[shown.rindex("you: first"):]
    assert "\x1b" not in shown
    assert "claude: two   (abandoned)" in listing and "claude: three   ← head" in listing
    assert listing.count("├ ") == 2
    assert shown.count("head moved") == 1


def test_pure_tree_order_and_indentation():
    entries = [("a", None, "user"), ("b", "a", "assistant"), ("c", "b", "user"), ("d", "c", "assistant"),
               ("e", "b", "user"), ("f", "e", "assistant"), ("g", None, "user")]
    records = [{"type": "header", "session_id": "s", "workspace": "/w"}]
    for entry_id, parent, kind in entries:
        role = "user" if kind == "user" else "assistant"
        records.append({"type": "entry", "id": entry_id, "parent": parent, "kind": kind,
                        "message": {"role": role, "content": [{"type": "text", "text": entry_id.upper()}]}})
    records.append({"type": "head", "entry": "f"})
    nodes = branching.tree(SessionState.from_records(records))
    assert [(n.entry_id, n.depth, n.fork) for n in nodes] == [
        ("a", 0, True), ("b", 0, False), ("c", 1, True), ("d", 1, False), ("e", 1, True), ("f", 1, False),
        ("g", 0, True)]
    assert [n.entry_id for n in nodes if n.is_leaf] == ["d", "f", "g"]
    assert [n.entry_id for n in nodes if n.on_branch] == ["a", "b", "e", "f"]
    state = SessionState.from_records(records)
    move = branching.plan_move(state, "c")
    assert (move.target, move.draft, [e["id"] for e in move.abandoned]) == ("b", "C", ["e", "f"])


def test_a_reply_that_asked_for_tools_cannot_be_the_head(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "true"})), reply(text("ran")))
    repl, answers, env = start_repl(fake_api, workspace, khaelor_home)
    repl.options.allow = ("bash",)
    repl.handle("run it")
    state = repl.runtime.session.state
    [asked] = [e["id"] for e in state.entries.values() if e.get("kind") == "assistant" and "tool_use" in json.dumps(e)]
    before = repl.runtime.session.path.read_bytes()
    repl.handle(f"/tree {asked}")
    assert "asked for tool calls; choose the tool results after it" in env.stderr.getvalue()
    assert repl.runtime.session.path.read_bytes() == before
    answers.lines.append("")  # Enter: no summary
    repl.handle("/tree " + entry_with(state, "tool_results", "tool_result"))
    assert "head moved to ↳ 1 tool result" in env.stdout.getvalue()
    repl._detach()


@pytest.mark.parametrize("failure", ["api-error", "empty"])
def test_a_failed_summary_leaves_the_head_where_it_was(fake_api, workspace, khaelor_home, failure):
    summary = error_response(400, "bad request") if failure == "api-error" else reply(text("  "))
    fake_api.script(reply(text("one")), reply(text("two")), summary)
    repl, answers, env = start_repl(fake_api, workspace, khaelor_home)
    repl.handle("first")
    repl.handle("second")
    state = repl.runtime.session.state
    head = state.head
    answers.lines.append("s")
    repl.handle("/tree " + entry_with(state, "assistant", "one"))
    assert state.head == head
    assert "the head stays where it was" in env.stderr.getvalue()
    assert not [r for r in read_log(repl.runtime.session.path).records if r["type"] == "head"]
    repl._detach()


def test_fork_and_clone_make_new_logs_naming_the_parent_and_leave_it_unchanged(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")), reply(text("three")), reply(text("in the fork")))
    repl, answers, env = start_repl(fake_api, workspace, khaelor_home)
    repl.handle("first")
    repl.handle("second")
    state = repl.runtime.session.state
    answers.lines.append("n")
    repl.handle("/tree " + entry_with(state, "assistant", "one"))
    repl.handle("third")
    original = repl.runtime.session.path
    original_id, original_entries, head = original.stem, dict(state.entries), state.head
    goal.save(original, goal.Goal("ship it", budget=3))
    before = original.read_bytes()

    repl.handle("/clone")
    cloned = repl.runtime.session
    assert cloned.path != original and cloned.state.header["parent_session"] == original_id
    assert cloned.state.header["branched_from"] == {"how": "clone", "session_id": original_id, "head": head}
    assert set(cloned.state.entries) == set(original_entries) and cloned.state.head == head

    repl.handle(f"/fork {original_id}")
    forked = repl.runtime.session
    assert forked.state.header["parent_session"] == original_id
    assert [e["message"]["content"][0]["text"] for e in forked.state.branch()] == ["first", "one", "third", "three"]
    assert len(forked.state.entries) == 4 and not forked.state.usage
    assert goal.load(forked.path) is None and goal.load(cloned.path) is None  # a new session starts without one
    repl.handle("go on")
    repl._detach()
    after = original.read_bytes()
    assert after.startswith(before) and [json.loads(line)["type"] for line in after[len(before):].splitlines()] == ["close"]
    assert texts_of(fake_api.message_requests[-1].body) == ["first", "one", "third", "three", "go on"]
    assert "forked " + original_id in env.stdout.getvalue() and "the original is unchanged" in env.stdout.getvalue()
    for log in khaelor_home.glob("sessions/*/*.jsonl"):
        assert log.stat().st_mode & 0o777 == 0o600


def test_fork_flag_in_print_mode(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("forked answer")))
    assert run_khaelor(["-p", "first"], workspace, fake_api).returncode == 0
    parent = log_of(khaelor_home)
    before = parent.read_bytes()
    done = run_khaelor(["-p", "--fork", parent.stem[:12], "next", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["session_id"] != parent.stem
    child = next(p for p in khaelor_home.glob("sessions/*/*.jsonl") if p != parent)
    assert read_log(child).records[0]["parent_session"] == parent.stem
    assert texts_of(fake_api.message_requests[-1].body) == ["first", "one", "next"]
    assert parent.read_bytes() == before


@pytest.mark.parametrize("args, message", [
    (["-p", "--fork"], "print mode needs a session id after --fork"),
    (["--fork", "x", "-c"], "--continue and --fork cannot be used together"),
    (["-p", "--fork", "nosuch", "hi"], "no session"),
])
def test_fork_flag_errors_are_one_line(fake_api, workspace, khaelor_home, args, message):
    done = run_khaelor(args, workspace, fake_api)
    assert done.returncode != 0 and message in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2


def test_fork_of_an_empty_branch_is_refused(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    repl, answers, env = start_repl(fake_api, workspace, khaelor_home)
    repl.handle("first")
    repl.handle("/clear")
    repl.handle("/fork")
    assert "no conversation on its active branch to fork" in env.stderr.getvalue()
    assert len(list(khaelor_home.glob("sessions/*/*.jsonl"))) == 1
    repl._detach()


def test_tree_chooser_on_a_terminal_moves_with_arrow_keys(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")))
    # The chooser opens on the head ("two"); two rows up is "one"; then no summary.
    out, _, _ = transcript(make_env(workspace, khaelor_home, fake_api), "first\rsecond\r/tree\r\x1b[A\x1b[A\rn\r")
    assert "head moved to claude: one" in out
    records = read_log(log_of(khaelor_home)).records
    [move] = [r for r in records if r["type"] == "head"]
    assert move["entry"] == entry_with(SessionState.from_records(records), "assistant", "one")


def test_draft_comes_back_in_the_prompt(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")), reply(text("two")), reply(text("edited")))
    # Choose "second" (one row above the head), no summary, then append " again" to the draft and send.
    transcript(make_env(workspace, khaelor_home, fake_api), "first\rsecond\r/tree\r\x1b[A\rn\r again\r")
    assert texts_of(fake_api.message_requests[-1].body) == ["first", "one", "second again"]


def test_inspect_of_a_plain_session_has_one_leaf(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    repl, _, _ = start_repl(fake_api, workspace, khaelor_home)
    repl.handle("first")
    repl._detach()
    report = json.loads(run_khaelor(["sessions", "inspect", log_of(khaelor_home).stem, "--json"], workspace).stdout)
    assert [leaf["is_head"] for leaf in report["leaves"]] == [True]


def test_plain_reader_lists_ids_for_choosing(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    env = make_env(workspace, khaelor_home, fake_api)
    repl = Repl(env, Options(), Output(env.stdout, env.stderr, color=False), PlainReader(io.StringIO("\n")))
    repl.handle("first")
    repl.handle("/tree")
    repl._detach()
    state = state_of(log_of(khaelor_home))
    for entry_id in state.entries:
        assert f"  {entry_id}  " in env.stdout.getvalue()


def test_fork_flag_without_id_offers_the_sessions_when_there_is_no_picker(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    assert run_khaelor(["-p", "first"], workspace, fake_api).returncode == 0
    done = run_khaelor(["--fork"], workspace, fake_api, input="")
    assert done.returncode == 0, done.stderr
    assert "first" in done.stdout and "/fork ID forks one of these" in done.stdout
    assert len(list(khaelor_home.glob("sessions/*/*.jsonl"))) == 1
