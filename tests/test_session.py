"""Replay: the state a log implies, and what resume settles."""

from khaelor.session import INDETERMINATE, NOT_RUN, Session, SessionState

HEADER = {"type": "header", "session_id": "20261129T000000-abcdef", "workspace": "/w", "model": "m1"}


def entry(entry_id, parent, kind, role=None, content=None, **extra):
    message = {"role": role, "content": content} if role else None
    return {"type": "entry", "id": entry_id, "parent": parent, "kind": kind, "message": message, **extra}


def use(call_id, name="bash"):
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"command": "true"}}


def test_messages_follow_the_selected_branch_and_merge_same_roles():
    state = SessionState.from_records([
        HEADER,
        entry("a", None, "user", "user", "first"),
        entry("b", "a", "assistant", "assistant", [{"type": "text", "text": "abandoned"}]),
        entry("c", "a", "assistant", "assistant", [{"type": "text", "text": "kept"}]),
        entry("d", "c", "user", "user", [{"type": "text", "text": "next"}]),
        entry("e", "d", "user", "user", [{"type": "text", "text": "more"}]),
    ])
    assert state.head == "e"
    assert state.messages() == [
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "kept"}]},
        {"role": "user", "content": [{"type": "text", "text": "next"}, {"type": "text", "text": "more"}]},
    ]


def test_head_record_moves_the_branch():
    state = SessionState.from_records([
        HEADER,
        entry("a", None, "user", "user", "q"),
        entry("b", "a", "assistant", "assistant", [{"type": "text", "text": "one"}]),
        {"type": "head", "entry": "a"},
    ])
    assert [m["role"] for m in state.messages()] == ["user"]


def test_model_entries_change_the_model_and_are_not_messages():
    state = SessionState.from_records([HEADER, entry("a", None, "model", model="m2")])
    assert state.model == "m2" and state.messages() == []


def test_usage_totals_and_open_requests():
    state = SessionState.from_records([
        HEADER,
        {"type": "request", "attempt": "r1", "model": "m1"},
        {"type": "usage", "attempt": "r1", "usage": {"input_tokens": 3, "output_tokens": 4,
                                                      "cache_read_input_tokens": 5, "cache_creation_input_tokens": 6}},
        {"type": "request", "attempt": "r2", "model": "m1"},
    ])
    assert state.usage_totals() == {"input_tokens": 3, "output_tokens": 4, "cache_read_tokens": 5, "cache_write_tokens": 6}
    assert list(state.open_requests) == ["r2"]


def test_file_state_is_rebuilt_from_reads_and_writes():
    state = SessionState.from_records([
        HEADER,
        {"type": "file_read", "path": "/w/a", "size": 1, "mtime_ns": 2, "sha256": "x"},
        {"type": "file_modified", "path": "/w/a", "size": 3, "mtime_ns": 4, "sha256": "y", "before": "x"},
        {"type": "file_read", "path": "/w/b", "size": 1, "mtime_ns": 2, "sha256": "z"},
        {"type": "file_modified", "path": "/w/b", "size": None, "mtime_ns": None, "sha256": None, "before": "z"},
    ])
    assert state.file_state.known["/w/a"].sha256 == "y"
    assert "/w/b" not in state.file_state.known


def test_closed_reflects_the_last_record():
    assert SessionState.from_records([HEADER, {"type": "close"}]).closed
    assert not SessionState.from_records([HEADER, {"type": "close"}, {"type": "entry", "id": "a", "parent": None,
                                                                      "kind": "user", "message": None}]).closed


def test_recover_settles_each_call_by_what_the_log_knows(tmp_path):
    log = tmp_path / "20261129T000000-abcdef.jsonl"
    session = Session.create(log, {k: v for k, v in HEADER.items() if k != "type"}, lambda: 0.0)
    session.add_entry("user", {"role": "user", "content": "go"})
    session.add_entry("assistant", {"role": "assistant", "content": [use("t1"), use("t2"), use("t3"), use("t4")]})
    for call in ("t1", "t2", "t3"):
        session.record("tool_request", call_id=call, name="bash", input={})
    session.record("permission", call_id="t1", decision="allow")
    session.record("tool_start", call_id="t1")
    session.record("tool_result", call_id="t1", is_error=False, content="fine")
    session.record("permission", call_id="t2", decision="allow")
    session.record("tool_start", call_id="t2")
    session.record("permission", call_id="t3", decision="allow")
    session.record("request", attempt="r9", model="m1", operation="turn")
    session.journal.close()

    resumed = Session.open(log, lambda: 0.0)
    notes = resumed.recover()
    resumed.journal.close()
    results = {b["tool_use_id"]: b for b in resumed.state.messages()[-1]["content"]}
    assert results["t1"] == {"type": "tool_result", "tool_use_id": "t1", "content": "fine"}
    assert results["t2"]["content"] == INDETERMINATE and results["t2"]["is_error"]
    assert results["t3"]["content"] == INDETERMINATE
    assert results["t4"]["content"] == NOT_RUN
    assert len(resumed.state.uncertain) == 1 and not resumed.state.open_requests
    assert len(notes) == 2
