"""The permission engine end to end: rules and their errors, answers and grants, durable prompts, print mode.

The agent runs for real: through `runtime.start` in process (answers scripted
by a plain callable, the REPL's extension point) or through the CLI in a
subprocess, always with the real SDK against the fake Messages API.
"""

import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from khaelor.config import Rule, load_config
from khaelor.env import Env
from khaelor.errors import ConfigError
from khaelor.journal import read_log
from khaelor.asking import Answer, Question, allow_flags, answered, unattended
from khaelor.permissions import Decision, Policy, ToolCall, decide
from khaelor.rulefile import save_rules
from khaelor.runtime import Options, start
from tests.conftest import TEST_KEY, khaelor_env, run_khaelor
from tests.fakeapi import FakeAPI, reply, text, tool_use


def the_log(home: Path) -> Path:
    [log] = sorted(home.glob("sessions/*/*.jsonl"))
    return log


def records(home: Path, kind: str | None = None) -> list[dict]:
    found = read_log(the_log(home)).records
    return [r for r in found if kind is None or r["type"] == kind]


def make_env(workspace: Path, home: Path, api: FakeAPI) -> Env:
    environ = {"KHAELOR_HOME": str(home), "HOME": str(home.parent), "ANTHROPIC_BASE_URL": api.base_url,
               "ANTHROPIC_API_KEY": TEST_KEY, "PATH": os.environ["PATH"]}
    return Env(stdin=io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO(), environ=environ, cwd=workspace)


class Scripted:
    """An `ask` callback answering from a list, keeping every question."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.questions: list[Question] = []

    def __call__(self, question: Question):
        self.questions.append(question)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def run_turn(workspace, home, api, ask, prompt="go", **options):
    runtime = start(make_env(workspace, home, api), Options(**options), notice=lambda line: None, ask=ask)
    try:
        return runtime, runtime.agent.run(prompt)
    finally:
        runtime.close()


def tool_results(request) -> list[dict]:
    return [b for m in request.body["messages"] for b in m["content"] if b.get("type") == "tool_result"]


# --- rules and their errors ----------------------------------------------------


@pytest.mark.parametrize("rule, problem", [
    (Rule("bash", "git status && rm x", "project", "/w/.khaelor/config.yaml:4"), "one simple command"),
    (Rule("bash", "echo 'open", "project", "/w/.khaelor/config.yaml:4"), "unbalanced quotes"),
    (Rule("bash", "ls > out", "project", "/w/.khaelor/config.yaml:4"), "one simple command"),
    (Rule("edit", "!src/**", "project", "/w/.khaelor/config.yaml:4"), "negated"),
    (Rule("read", "src/\\", "project", "/w/.khaelor/config.yaml:4"), "gitignore-style"),
])
def test_invalid_rules_name_their_file_and_line(tmp_path, rule, problem):
    with pytest.raises(ConfigError) as caught:
        Policy("default", tmp_path, allow=[rule])
    assert caught.value.message.startswith("/w/.khaelor/config.yaml:4: invalid allow rule")
    assert problem in caught.value.message


def test_an_invalid_rule_in_a_config_file_stops_the_cli_with_one_line(fake_api, workspace, khaelor_home):
    (workspace / ".khaelor").mkdir()
    config = workspace / ".khaelor" / "config.yaml"
    config.write_text("permissions:\n  allow:\n    - 'bash: git status'\n    - 'bash: git status; rm -rf ~'\n")
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith(f"khaelor: error: {config}:4: invalid allow rule "
                                                  "'bash: git status; rm -rf ~'")
    assert "Traceback" not in done.stderr and not list(khaelor_home.glob("sessions/*/*.jsonl"))
    config.unlink()
    flag = run_khaelor(["-p", "hi", "--allow", "bash: ls | sh"], workspace, fake_api)
    assert flag.returncode == 2 and "command line: invalid allow rule 'bash: ls | sh'" in flag.stderr


def test_rules_keep_their_source_in_the_decision(tmp_path):
    rule = Rule("bash", "npm test", "local", f"{tmp_path}/.khaelor/config.local.yaml:3")
    decision = decide(ToolCall("bash", {"command": "npm test"}), Policy("default", tmp_path, allow=[rule]))
    assert decision.as_record() == {"decision": "allow", "reason": "allow rule 'bash: npm test' (local)",
                                    "rule": "bash: npm test", "source": "rule:local", "origin": rule.origin,
                                    "subject": "npm test"}


def test_session_grants_are_rules_and_bad_ones_are_ignored(tmp_path):
    policy = Policy("default", tmp_path).with_grants(["bash: touch x", "bash: a && b", "nonsense"])
    assert decide(ToolCall("bash", {"command": "touch x"}), policy).source == "rule:session"
    assert decide(ToolCall("bash", {"command": "touch y"}), policy).verdict == "ask"


def test_odd_input_is_judged_without_raising(tmp_path):
    assert decide(ToolCall("read", {"path": "x" * 100_000}), Policy("default", tmp_path)).verdict == "allow"
    assert decide(ToolCall("read", {"path": "../" * 5000}), Policy("default", tmp_path)).verdict == "ask"
    assert decide(ToolCall("bash", {"command": "\x00" * 10}), Policy("bypass", tmp_path)).verdict == "ask"
    assert decide(ToolCall("bash", {"command": ["ls"]}), Policy("bypass", tmp_path)).verdict == "deny"


def test_print_mode_turns_an_ask_into_a_denial_naming_the_allow_rule():
    ask = Decision("ask", "`touch x` needs permission in default mode", suggestions=("bash: touch x",))
    denial = unattended(ask)
    assert (denial.verdict, denial.source) == ("deny", "print-mode")
    assert denial.reason.endswith("print mode never prompts — rerun with --allow 'bash: touch x' to allow it")
    assert allow_flags(["bash: a b", "edit: ./x"]) == "--allow 'bash: a b' --allow 'edit: ./x'"


# --- answers ----------------------------------------------------------------------

QUESTION = Question("t1", "bash", {"command": "touch x"}, "touch x", "`touch x` needs permission", ("bash: touch x",))


def test_answers_become_decisions(tmp_path):
    assert answered(QUESTION, None, tmp_path).as_record()["source"] == "no-answer"
    assert answered(QUESTION, "yes", tmp_path).verdict == "deny"
    assert answered(QUESTION, Answer("maybe"), tmp_path).verdict == "deny"
    denied = answered(QUESTION, Answer("deny", "use make instead"), tmp_path)
    assert (denied.verdict, denied.source, denied.message) == ("deny", "user", "use make instead")
    assert denied.reason == "denied by the person: use make instead"
    once = answered(QUESTION, Answer("once"), tmp_path)
    assert (once.verdict, once.scope, once.grants) == ("allow", "once", ())
    session = answered(QUESTION, Answer("session"), tmp_path)
    assert (session.scope, session.grants) == ("session", ("bash: touch x",))
    assert not (tmp_path / ".khaelor").exists()
    unnamed = Question("t2", "bash", {"command": "$X"}, "$X", "not understood")
    assert unnamed.scopes == ("once", "deny") and QUESTION.scopes == ("once", "session", "always", "deny")
    assert answered(unnamed, Answer("always"), tmp_path).scope == "once"


def test_always_saves_the_rule_owner_private(tmp_path):
    decision = answered(QUESTION, Answer("always"), tmp_path)
    path = tmp_path / ".khaelor" / "config.local.yaml"
    assert (decision.scope, decision.grants) == ("always", ("bash: touch x",)) and str(path) in decision.reason
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text()) == {"permissions": {"allow": ["bash: touch x"]}}


def test_always_falls_back_to_the_session_when_saving_fails(tmp_path):
    (tmp_path / ".khaelor").mkdir()
    (tmp_path / ".khaelor" / "config.local.yaml").write_text("permissions: [unclosed\n")
    decision = answered(QUESTION, Answer("always"), tmp_path)
    assert (decision.verdict, decision.scope, decision.grants) == ("allow", "session", ("bash: touch x",))
    assert "saving it failed" in decision.reason and "invalid YAML" in decision.reason


@pytest.mark.parametrize("before, after", [
    ("", "permissions:\n  allow:\n    - \"bash: new\"\n"),
    ("# mine\nmodel: m  # keep\n", "# mine\nmodel: m  # keep\npermissions:\n  allow:\n    - \"bash: new\"\n"),
    ("model: m\npermissions:\n  # rules\n  deny: [bash]\n",
     "model: m\npermissions:\n  # rules\n  allow:\n    - \"bash: new\"\n  deny: [bash]\n"),
    ("permissions:\n  allow:\n  - bash: old  # why\n  # the end\n",
     "permissions:\n  allow:\n  - bash: old  # why\n  - \"bash: new\"\n  # the end\n"),
    ("permissions:\n    allow:\n        - 'bash: old'\n    deny: []",
     "permissions:\n    allow:\n        - 'bash: old'\n        - \"bash: new\"\n    deny: []"),
    ("permissions:\n  allow:\n    - 'bash: new'\n", "permissions:\n  allow:\n    - 'bash: new'\n"),
])
def test_saving_keeps_the_file_as_written(tmp_path, before, after):
    path = tmp_path / ".khaelor" / "config.local.yaml"
    if before:
        path.parent.mkdir()
        path.write_text(before)
        path.chmod(0o640)
    save_rules(tmp_path, ["bash: new"])
    assert path.read_text() == after
    assert stat.S_IMODE(path.stat().st_mode) == (0o640 if before else 0o600)


def test_saving_rewrites_flow_style_settings_and_the_result_loads(tmp_path):
    path = tmp_path / ".khaelor" / "config.local.yaml"
    path.parent.mkdir()
    path.write_text("{model: m, permissions: {allow: ['bash: old'], deny: [bash]}}\n")
    save_rules(tmp_path, ["bash: a 'quoted' \"word\"", "edit: ./src/a[1].py"])
    env = Env(environ={"KHAELOR_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    config = load_config(env, tmp_path)
    assert [r.pattern for r in config.permissions.allow] == ["old", "a 'quoted' \"word\"", "./src/a[1].py"]
    assert config.model == "m" and [r.tool for r in config.permissions.deny] == ["bash"]


@pytest.mark.parametrize("content", ["[1, 2]\n", "permissions:\n  allow: bash\n", "a: [\n"])
def test_saving_refuses_files_it_cannot_extend(tmp_path, content):
    path = tmp_path / ".khaelor" / "config.local.yaml"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(ConfigError):
        save_rules(tmp_path, ["bash: new"])
    assert path.read_text() == content


def test_saving_never_writes_through_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.yaml"
    target.write_text("model: m\n")
    (tmp_path / ".khaelor").mkdir()
    os.symlink(target, tmp_path / ".khaelor" / "config.local.yaml")
    with pytest.raises(ConfigError):
        save_rules(tmp_path, ["bash: new"])
    assert target.read_text() == "model: m\n"


# --- the agent asking through the callback ---------------------------------------------


def test_scripted_answers_through_the_agent(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "git status; touch a.txt"})),
                    reply(tool_use("bash", {"command": "touch a.txt"})),
                    reply(tool_use("bash", {"command": "touch b.txt"})), reply(text("done")))
    ask = Scripted(Answer("once"), Answer("session"), Answer("deny", "not b, please"))
    _, outcome = run_turn(workspace, khaelor_home, fake_api, ask, allow=("bash: git status",))
    assert outcome.text == "done" and (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    first = ask.questions[0]
    assert (first.tool, first.subject, first.rules) == ("bash", "git status; touch a.txt", ("bash: touch a.txt",))
    assert first.input == {"command": "git status; touch a.txt"} and "`touch a.txt`" in first.reason
    kinds = [r["type"] for r in records(khaelor_home) if r["type"] in ("permission_request", "permission",
                                                                        "tool_start")]
    assert kinds == ["permission_request", "permission", "tool_start"] * 2 + ["permission_request", "permission"]
    answers = records(khaelor_home, "permission")
    assert [(a["source"], a.get("scope")) for a in answers] == [("user", "once"), ("user", "session"),
                                                                ("user", "deny")]
    assert answers[1]["grants"] == ["bash: touch a.txt"]
    told = tool_results(fake_api.message_requests[3])[-1]
    assert told["is_error"] and told["content"] == "Permission denied: denied by the person: not b, please"
    assert outcome.denials[0]["reason"] == "denied by the person: not b, please"


def test_a_session_grant_survives_resume_and_is_not_asked_again(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "touch a.txt"})),
                    reply(tool_use("bash", {"command": "touch a.txt"})), reply(text("one")))
    ask = Scripted(Answer("session"))
    run_turn(workspace, khaelor_home, fake_api, ask)
    assert len(ask.questions) == 1
    fake_api.script(reply(tool_use("bash", {"command": "touch a.txt"})), reply(text("two")))
    _, outcome = run_turn(workspace, khaelor_home, fake_api, Scripted(), continue_latest=True)
    assert outcome.text == "two" and outcome.denials == []
    assert records(khaelor_home, "permission")[-1]["source"] == "rule:session"


def test_always_is_saved_and_applies_to_new_sessions(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("write", {"path": "notes.txt", "content": "hi\n"})),
                    reply(tool_use("write", {"path": "notes.txt", "content": "hi again\n"})), reply(text("ok")))
    run_turn(workspace, khaelor_home, fake_api, Scripted(Answer("always")))
    local = workspace / ".khaelor" / "config.local.yaml"
    assert yaml.safe_load(local.read_text()) == {"permissions": {"allow": ["edit: ./notes.txt"]}}
    fake_api.script(reply(tool_use("read", {"path": "notes.txt"})),
                    reply(tool_use("edit", {"path": "notes.txt", "old_string": "again", "new_string": "twice"})),
                    reply(text("ok")))
    done = run_khaelor(["-p", "edit", "--output-format", "json"], workspace, fake_api)
    assert json.loads(done.stdout)["permission_denials"] == []
    assert (workspace / "notes.txt").read_text() == "hi twice\n"


@pytest.mark.parametrize("answer", [None, EOFError(), Answer("deny")])
def test_no_answer_is_a_denial(fake_api, workspace, khaelor_home, answer):
    fake_api.script(reply(tool_use("bash", {"command": "touch a.txt"})), reply(text("fine")))
    _, outcome = run_turn(workspace, khaelor_home, fake_api, Scripted(answer))
    assert not (workspace / "a.txt").exists() and len(outcome.denials) == 1
    assert not any(r["type"] == "tool_start" for r in records(khaelor_home))


# --- durable prompts -------------------------------------------------------------

ASKING_CHILD = """
import pathlib, sys, time
from khaelor.env import Env
from khaelor.runtime import Options, start

def ask(question):
    pathlib.Path(sys.argv[1]).write_text(question.subject)
    time.sleep(600)

start(Env(), Options(), notice=lambda line: None, ask=ask).agent.run("make the marker")
"""


def kill_while_asking(workspace: Path, home: Path, command: str) -> None:
    """Run an agent in a child process, kill it while its permission question is open."""
    asking = home.parent / "asking"
    with FakeAPI() as api:
        api.script(reply(tool_use("bash", {"command": command})), reply(text("never")))
        child = subprocess.Popen([sys.executable, "-c", ASKING_CHILD, str(asking)], cwd=workspace,
                                 env=khaelor_env(api), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while not asking.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.communicate()
    assert asking.read_text() == command
    kinds = [r["type"] for r in records(home)]
    assert kinds[-1] == "permission_request" and "permission" not in kinds


def test_a_pending_request_is_asked_again_on_resume_and_runs_only_after_the_answer(workspace, khaelor_home):
    kill_while_asking(workspace, khaelor_home, "touch marker.txt")
    seen = []

    def ask(question):
        seen.append((question.subject, (workspace / "marker.txt").exists()))
        return Answer("once")

    with FakeAPI() as api:
        api.script(reply(text("carried on")))
        runtime, outcome = run_turn(workspace, khaelor_home, api, ask, prompt="continue", continue_latest=True)
        assert seen == [("touch marker.txt", False)] and (workspace / "marker.txt").exists()
        assert any("asked again — allowed, and it ran" in note for note in runtime.recovered)
        [result] = tool_results(api.message_requests[0])
        assert result.get("is_error") is not True and outcome.text == "carried on"
    kinds = [r["type"] for r in records(khaelor_home)]
    assert kinds.count("permission_request") == 1
    resumed = kinds[kinds.index("permission_request") + 1:]
    assert resumed[:2] == ["permission", "tool_start"] and "tool_result" in resumed


def test_a_pending_request_is_denied_in_print_mode_and_never_runs(workspace, khaelor_home):
    kill_while_asking(workspace, khaelor_home, "touch marker.txt")
    with FakeAPI() as api:
        api.script(reply(text("ok")))
        done = run_khaelor(["-p", "-c", "continue", "--output-format", "json"], workspace, api)
        assert done.returncode == 0, done.stderr
        [result] = tool_results(api.message_requests[0])
        assert result["is_error"] and "print mode never prompts" in result["content"]
    assert not (workspace / "marker.txt").exists()
    [denial] = json.loads(done.stdout)["permission_denials"]
    assert denial["input"] == {"command": "touch marker.txt"} and denial["source"] == "print-mode"
    assert "asked again — denied" in done.stderr and "--allow 'bash: touch marker.txt'" in done.stderr


def test_a_pending_request_without_anyone_to_ask_again_is_denied_on_recover(workspace, khaelor_home):
    from khaelor.session import Session

    kill_while_asking(workspace, khaelor_home, "touch marker.txt")
    session = Session.open(the_log(khaelor_home), time.time)
    notes = session.recover()
    session.journal.close()
    assert any("was denied" in note for note in notes) and not (workspace / "marker.txt").exists()
    result = records(khaelor_home, "tool_result")[-1]
    assert result["is_error"] and result["content"].startswith("Permission denied: its permission request was never")


# --- print mode end to end -----------------------------------------------------


@pytest.mark.parametrize("attack", ["git status; touch PWNED", "git status && $(touch PWNED)",
                                    "git status | sh -c 'touch PWNED'"])
def test_an_allowed_git_status_carries_nothing_else(fake_api, workspace, khaelor_home, attack):
    fake_api.script(reply(tool_use("bash", {"command": attack})), reply(text("could not")))
    done = run_khaelor(["-p", "check", "--allow", "bash: git status", "--output-format", "json"], workspace,
                       fake_api)
    assert done.returncode == 0, done.stderr
    assert not (workspace / "PWNED").exists()
    [denial] = json.loads(done.stdout)["permission_denials"]
    assert denial["tool"] == "bash" and denial["input"] == {"command": attack} and denial["source"] == "print-mode"
    [logged] = records(khaelor_home, "permission")
    assert logged["decision"] == "deny" and logged["source"] == "print-mode" and logged["subject"] == attack
    assert "khaelor: denied bash: " in done.stderr


def test_the_stderr_hint_names_the_allow_rule_and_the_rule_works(fake_api, workspace):
    fake_api.script(reply(tool_use("bash", {"command": "git status; touch made"})), reply(text("no")))
    done = run_khaelor(["-p", "go", "--allow", "bash: git status"], workspace, fake_api)
    assert done.returncode == 0 and "--allow 'bash: touch made'" in done.stderr
    fake_api.script(reply(tool_use("bash", {"command": "git status; touch made"})), reply(text("yes")))
    again = run_khaelor(["-p", "go", "--allow", "bash: git status", "--allow", "bash: touch made"], workspace, fake_api)
    assert again.returncode == 0 and (workspace / "made").exists() and again.stderr == ""


def snapshot(workspace: Path) -> dict:
    files = {str(p.relative_to(workspace)): p.read_bytes() for p in sorted(workspace.rglob("*"))
             if p.is_file() and ".git" not in p.parts}
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=workspace, capture_output=True, text=True).stdout
    index = (workspace / ".git" / "index").read_bytes()
    return {"files": files, "head": head, "index": index}


def test_plan_mode_leaves_the_tree_unchanged(fake_api, workspace, khaelor_home):
    (workspace / "a.txt").write_text("alpha\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["add", "a.txt"], cwd=workspace, check=True)
    subprocess.run(git + ["commit", "-qm", "one"], cwd=workspace, check=True)
    (workspace / "a.txt").write_text("alpha changed\n")
    before = snapshot(workspace)
    fake_api.script(
        reply(tool_use("read", {"path": "a.txt"})),
        reply(tool_use("write", {"path": "b.txt", "content": "new\n"})),
        reply(tool_use("edit", {"path": "a.txt", "old_string": "alpha", "new_string": "omega"})),
        reply(tool_use("bash", {"command": "echo x > f"})),
        reply(tool_use("bash", {"command": "sed -i s/alpha/omega/ a.txt"})),
        reply(tool_use("bash", {"command": "git commit -am sneaky"})),
        reply(text("planned")))
    done = run_khaelor(["-p", "plan it", "--permission-mode", "plan", "--allow", "bash", "--output-format", "json"],
                       workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert snapshot(workspace) == before
    denials = json.loads(done.stdout)["permission_denials"]
    assert [d["tool"] for d in denials] == ["write", "edit", "bash", "bash", "bash"]
    assert all("plan mode" in d["reason"] for d in denials)
    read = tool_results(fake_api.message_requests[1])[-1]
    assert "alpha changed" in read["content"]


def test_an_ask_only_call_in_print_mode_exits_0_with_the_denial(fake_api, workspace):
    fake_api.script(reply(tool_use("write", {"path": "x.txt", "content": "x"})), reply(text("could not write")))
    started = time.monotonic()
    done = run_khaelor(["-p", "write it", "--output-format", "json"], workspace, fake_api, timeout=30)
    assert done.returncode == 0 and time.monotonic() - started < 30
    result = json.loads(done.stdout)
    assert result["result"] == "could not write" and not (workspace / "x.txt").exists()
    [denial] = result["permission_denials"]
    assert denial["allow"] == ["edit: ./x.txt"] and "--allow 'edit: ./x.txt'" in denial["reason"]


def test_a_symlink_out_of_the_workspace_is_outside_for_writes(fake_api, workspace, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    os.symlink(outside, workspace / "link.txt")
    fake_api.script(reply(tool_use("write", {"path": "link.txt", "content": "changed\n"})), reply(text("no")))
    done = run_khaelor(["-p", "write", "--permission-mode", "accept-edits", "--output-format", "json"], workspace,
                       fake_api)
    assert done.returncode == 0 and outside.read_text() == "keep\n"
    [denial] = json.loads(done.stdout)["permission_denials"]
    assert "outside the workspace" in denial["reason"] and denial["allow"] == [f"edit: {outside}"]
