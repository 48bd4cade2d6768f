"""`khaelor sessions import`: KHAELOR exports and logs, pi v3 (and v1) sessions, and refusals."""

import json
import stat

import pytest

from khaelor.journal import read_log
from khaelor.session import SessionState
from tests.conftest import run_khaelor
from tests.fakeapi import reply, text, tool_use


def import_(workspace, path):
    return run_khaelor(["sessions", "import", str(path)], workspace)


def new_session_id(done) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout.split(" as session ")[1].split(":")[0]


def log_of(home, session_id):
    [log] = home.glob(f"sessions/*/{session_id}.jsonl")
    return log


@pytest.fixture
def session(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "echo hi"})), reply(text("It said hi.")))
    done = run_khaelor(["-p", "run echo", "--allow", "bash"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    [log] = khaelor_home.glob("sessions/*/*.jsonl")
    return log


def comparable(document: dict) -> dict:
    """An export without what differs by design: ids, times and provenance of the copy."""
    rest = {k: v for k, v in document.items() if k not in ("session_id", "exported_at", "redaction")}
    rest["metadata"] = {k: v for k, v in document["metadata"].items() if k != "created"}
    rest["records"] = document["records"][1:]
    return rest


def test_export_import_export_round_trip(session, workspace, khaelor_home):
    assert run_khaelor(["sessions", "export", session.stem, "--output", "a.json"], workspace).returncode == 0
    source = workspace / "a.json"
    before = source.read_bytes()
    new_id = new_session_id(import_(workspace, source))
    assert source.read_bytes() == before
    copy = log_of(khaelor_home, new_id)
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    header = read_log(copy).records[0]
    assert header["session_id"] == new_id != session.stem
    assert header["parent_session"] == session.stem and header["imported_from"]["format"] == "khaelor-session-export"
    assert run_khaelor(["sessions", "export", new_id, "--output", "b.json"], workspace).returncode == 0
    first, second = (json.loads((workspace / name).read_text()) for name in ("a.json", "b.json"))
    assert comparable(first) == comparable(second)


def test_imported_session_continues_with_print_mode(session, workspace, fake_api, khaelor_home):
    new_id = new_session_id(import_(workspace, session))
    state = SessionState.from_records(read_log(log_of(khaelor_home, new_id)).records)
    assert [m["role"] for m in state.messages()] == ["user", "assistant", "user", "assistant"]
    fake_api.script(reply(text("continuing")))
    done = run_khaelor(["-p", "-r", new_id, "and now?"], workspace, fake_api)
    assert done.returncode == 0 and done.stdout == "continuing\n", done.stderr
    sent = fake_api.message_requests[-1].body["messages"]
    assert len(sent) == 5 and sent[0]["content"][0]["text"] == "run echo"


def test_imported_permissions_grant_nothing(session, workspace, fake_api):
    new_id = new_session_id(import_(workspace, session))
    fake_api.script(reply(tool_use("bash", {"command": "echo hi"})), reply(text("denied")))
    done = run_khaelor(["-p", "-r", new_id, "again", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    [denial] = json.loads(done.stdout)["permission_denials"]
    assert denial["tool"] == "bash" and denial["input"] == {"command": "echo hi"}


# --- pi sessions, written from pi's documented v3 format ----------------------------------------------------------

def pi_entry(kind, entry_id, parent, **fields):
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": "2026-05-01T10:00:00.000Z", **fields}


def pi_message(entry_id, parent, role, content, **fields):
    return pi_entry("message", entry_id, parent, message={"role": role, "content": content, "timestamp": 1, **fields})


def assistant(entry_id, parent, blocks, stop="stop"):
    return pi_message(entry_id, parent, "assistant", blocks, api="anthropic-messages", provider="anthropic",
                      model="claude-sonnet-4-5", stopReason=stop,
                      usage={"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})


PI_HEADER = {"type": "session", "version": 3, "id": "019e1a2b-3c4d-7e5f-8a9b-0c1d2e3f4a5b",
             "timestamp": "2026-05-01T10:00:00.000Z", "cwd": "/home/dev/proj"}


def pi_session(path, entries, header=PI_HEADER):
    path.write_text("".join(json.dumps(line) + "\n" for line in [header, *entries]))
    return path


def branched_pi_entries():
    """Two branches from one user message; the second (active) has a tool call, a compaction and a label."""
    return [
        pi_entry("model_change", "3f888ff7", None, provider="anthropic", modelId="claude-sonnet-4-5"),
        pi_entry("thinking_level_change", "df7e3a0f", "3f888ff7", thinkingLevel="off"),
        pi_message("bdcb6b3d", "df7e3a0f", "user", [{"type": "text", "text": "List files"}]),
        assistant("aaaa0001", "bdcb6b3d", [{"type": "text", "text": "abandoned answer"}]),
        assistant("ba0e1a86", "bdcb6b3d", [{"type": "thinking", "thinking": "Use ls.", "thinkingSignature": "EqQB"},
                                           {"type": "toolCall", "id": "toolu_01A|fc_1", "name": "bash",
                                            "arguments": {"command": "ls"}}], stop="toolUse"),
        pi_message("bcd80b64", "ba0e1a86", "toolResult", [{"type": "text", "text": "README.md\nsrc\n"}],
                   toolCallId="toolu_01A|fc_1", toolName="bash", isError=False),
        assistant("ecfbf04c", "bcd80b64", [{"type": "text", "text": "Two entries."}]),
        pi_entry("compaction", "68ed5e91", "ecfbf04c", summary="## Goal\nList files", firstKeptEntryId="bdcb6b3d",
                 tokensBefore=1000, details={"readFiles": ["README.md"], "modifiedFiles": []}),
        pi_entry("future_thing", "77777777", "68ed5e91", payload=1),
        pi_message("a7b0d89e", "77777777", "user", "Thanks"),
        pi_entry("label", "297dee77", "a7b0d89e", targetId="bdcb6b3d", label="checkpoint-1"),
        pi_entry("session_info", "537d5ec3", "297dee77", name="Refactor auth module"),
    ]


def test_pi_v3_session_with_branches_and_compaction(workspace, khaelor_home, tmp_path):
    source = pi_session(tmp_path / "pi.jsonl", branched_pi_entries())
    before = source.read_bytes()
    done = import_(workspace, source)
    new_id = new_session_id(done)
    assert "1 future_thing" in done.stdout
    assert source.read_bytes() == before
    log = log_of(khaelor_home, new_id)
    state = SessionState.from_records(read_log(log).records)
    assert state.head == "537d5ec3" and state.model == "claude-sonnet-4-5"
    assert "aaaa0001" in state.entries and "aaaa0001" not in [e["id"] for e in state.branch()]
    assert state.entries["a7b0d89e"]["parent"] == "68ed5e91"
    messages = state.messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    call = messages[1]["content"][1]
    assert call == {"type": "tool_use", "id": "toolu_01A_fc_1", "name": "bash", "input": {"command": "ls"}}
    assert messages[1]["content"][0]["signature"] == "EqQB"
    assert messages[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_01A_fc_1",
                                         "content": "README.md\nsrc\n"}
    assert "compacted into the following summary" in messages[0]["content"][0]["text"]
    assert messages[0]["content"][1]["text"] == "List files" and messages[4]["content"][-1]["text"] == "Thanks"
    assert state.entries["68ed5e91"]["boundary"] == "bdcb6b3d"
    header = read_log(log).records[0]
    assert header["imported_from"]["format"] == "pi-session" and header["imported_from"]["session_id"] == PI_HEADER["id"]
    assert json.loads((log.parent / ".metadata" / f"{new_id}.json").read_text())["name"] == "Refactor auth module"


def test_pi_session_continues_and_an_aborted_call_gets_a_result(workspace, khaelor_home, tmp_path, fake_api):
    entries = [pi_message("u1", None, "user", "Run it"),
               assistant("a1", "u1", [{"type": "toolCall", "id": "call_9", "name": "bash",
                                       "arguments": {"command": "make"}}], stop="toolUse")]
    new_id = new_session_id(import_(workspace, pi_session(tmp_path / "pi.jsonl", entries)))
    fake_api.script(reply(text("ok")))
    done = run_khaelor(["-p", "-r", new_id, "status?"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    sent = fake_api.message_requests[-1].body["messages"]
    assert sent[2]["content"][0]["type"] == "tool_result" and sent[2]["content"][0]["is_error"] is True


def test_pi_v1_session_is_migrated_in_memory(workspace, khaelor_home, tmp_path):
    header = {"type": "session", "id": "old", "timestamp": "2025-12-01T10:00:00.000Z", "cwd": "/p"}
    lines = [{"type": "message", "timestamp": "t", "message": {"role": "user", "content": "hi", "timestamp": 1}},
             {"type": "message", "timestamp": "t", "message": {"role": "hookMessage", "customType": "x",
                                                                "content": "note", "display": True}}]
    source = pi_session(tmp_path / "v1.jsonl", lines, header)
    new_id = new_session_id(import_(workspace, source))
    state = SessionState.from_records(read_log(log_of(khaelor_home, new_id)).records)
    assert [m["content"][-1]["text"] for m in state.messages()] == ["note"]
    assert len(state.branch()) == 2


@pytest.mark.parametrize("content,reason", [
    (b"<!DOCTYPE html><html></html>", "HTML"),
    (b'{"type":"session","version":3,"id":"x"}\n{"type":"message","id":"a","parentId":null,"message":\n', "line 2"),
    (b'{"type":"session","version":3,"id":"x"}\n\xff\xfe\n', "invalid UTF-8"),
    (b'{"type":"session","version":4,"id":"x"}\n', "version"),
    (b'{"type":"session","version":3,"id":"x"}\n{"type":"context_edit","id":"a","parentId":null}\n', "context_edit"),
    (b'{"type":"session","version":3,"id":"x"}\n{"type":"message","id":"a","parentId":null,'
     b'"message":{"role":"wizard","content":"x"}}\n', "role"),
    (b'{"format":"khaelor-session-export","version":2,"records":[]}', "version"),
    (b"name,value\n", "not a KHAELOR"),
])
def test_unsupported_or_damaged_input_is_refused_in_one_line(workspace, khaelor_home, tmp_path, content, reason):
    source = tmp_path / "in.jsonl"
    source.write_bytes(content)
    done = import_(workspace, source)
    assert done.returncode == 1 and reason in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert not list(khaelor_home.glob("sessions/*/*.jsonl"))


def test_session_grants_and_pending_requests_are_not_carried_over(session, workspace, khaelor_home, tmp_path):
    records = [json.loads(line) for line in session.read_text().splitlines()]
    decision = next(r for r in records if r["type"] == "permission")
    decision["grants"] = ["bash"]
    records.append({"type": "permission_request", "v": 1, "ts": "t", "call_id": decision["call_id"], "name": "bash"})
    source = tmp_path / "granted.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    done = import_(workspace, source)
    assert "1 permission grant(s) of the source session were not carried over" in done.stdout
    state = SessionState.from_records(read_log(log_of(khaelor_home, new_session_id(done))).records)
    assert state.grants == [] and state.pending == {}
    assert SessionState.from_records(records).grants == ["bash"]


def test_a_khaelor_log_with_a_broken_graph_is_refused(session, workspace, khaelor_home, tmp_path):
    records = [json.loads(line) for line in session.read_text().splitlines()]
    entry = next(r for r in records if r["type"] == "entry" and r["parent"])
    entry["parent"] = "nowhere"
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps(r) + "\n" for r in records))
    done = import_(workspace, broken)
    assert done.returncode == 1 and "unknown parent 'nowhere'" in done.stderr


def test_import_function_reports_for_the_repl(session, workspace, khaelor_home):
    from khaelor.env import Env
    from khaelor.importer import import_session
    from khaelor.store import Store

    env = Env(cwd=workspace, environ={"KHAELOR_HOME": str(khaelor_home)})
    report = import_session(session, Store(khaelor_home / "sessions", khaelor_home), workspace.resolve(), env)
    assert report.source_format == "khaelor-session" and report.source_id == session.stem
    assert report.path.exists() and report.entries == 4 and report.lines()[-1].endswith(report.session_id)
