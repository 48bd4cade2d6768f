"""The session picker: its pure state key by key, then the real prompt_toolkit application through a pipe."""

import datetime
import threading
import time
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from khaelor import catalog
from khaelor.catalog import Summary
from khaelor.journal import Journal
from khaelor.picker import Choice, PickerState, pick
from khaelor.store import Store

NOW = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.timezone.utc).timestamp()
HERE, THERE = "/home/me/app", "/srv/api"


def summary(session_id: str, title: str, updated: str, messages: int = 2, name: str | None = None,
            tags: tuple[str, ...] = (), workspace: str = HERE, cost: int | None = None) -> Summary:
    return Summary(f"{workspace}/{session_id}.jsonl", workspace, session_id, workspace=workspace, title=title,
                   name=name, tags=list(tags), created=updated, updated=updated, messages=messages, cost_nanos=cost)


PARSER = summary("s-parser", "fix the parser bug", "2026-03-01T11:48:00Z", 4, tags=("bug",), cost=12_300_000)
DOCS = summary("s-docs", "write docs", "2026-03-01T10:00:00Z", 10, name="docs day")
TEST = summary("s-test", "add a test", "2026-02-27T12:00:00Z", 4, cost=0)
ZEBRA = summary("s-zebra", "Zebra migration", "2026-03-01T11:59:00Z", 2, workspace=THERE)


class Loader:
    """This workspace's sessions or everyone's, counting the loads."""

    def __init__(self, here=(PARSER, DOCS, TEST), there=(ZEBRA,)):
        self.here, self.there, self.calls = list(here), list(there), []

    def __call__(self, everywhere: bool) -> list[Summary]:
        self.calls.append(everywhere)
        return self.here + self.there if everywhere else list(self.here)


def state(current: str | None = None, enter_action: str = "resume", **loader) -> PickerState:
    return PickerState(Loader(**loader), NOW, current, enter_action)


def ids(picker: PickerState) -> list[str]:
    return [s.id for s in picker.shown]


def texts(picker: PickerState, width: int = 120) -> list[str]:
    return [text for _, text in picker.lines(width)]


# --- the pure state -------------------------------------------------------------------------------------------------

def test_rows_show_label_relative_age_message_count_and_real_cost():
    picker = state(current="s-docs")
    rows = texts(picker)
    assert rows[0] == "this workspace · 3 of 3 sessions · sorted by recent"
    parser, docs, test = rows[1:4]
    assert parser.startswith("❯ fix the parser bug #bug ")
    assert parser.split()[-5:] == ["12m", "ago", "4", "msgs", "$0.0123"]
    assert docs.startswith("  docs day — write docs (current) ") and docs.split()[-5:] == ["2h", "ago", "10", "msgs", "n/a"]
    assert test.split()[-5:] == ["2d", "ago", "4", "msgs", "$0.0000"]
    assert len({row.index(" msgs") for row in (parser, docs, test)}) == 1
    assert all(len(row) < 80 for row in texts(picker, 80))


def test_the_hint_lists_the_keys():
    assert texts(state())[-2:] == [
        "↑↓ Enter resume · n new · / filter · Ctrl-R rename · Ctrl-X trash · Esc leave",
        "Tab all workspaces · Ctrl-S sort · Ctrl-N named only · Ctrl-P paths"]
    assert all(len(text) < 80 for text in texts(state(), 200)[-2:]), "the hints fit 80 columns"


def test_tab_switches_to_all_workspaces_and_back_loading_each_scope_once():
    picker = state()
    picker.press("down")
    picker.press("tab")
    assert ids(picker) == ["s-zebra", "s-parser", "s-docs", "s-test"] and picker.selected().id == "s-docs"
    rows = texts(picker)
    assert rows[0].startswith("all workspaces · 4 of 4 sessions")
    assert rows[1].endswith("  [api]") and rows[2].endswith("  [app]")
    assert "Tab this workspace" in rows[-1]
    picker.press("tab")
    picker.press("tab")
    assert ids(picker) == ["s-zebra", "s-parser", "s-docs", "s-test"]
    assert picker.load.calls == [False, True]


def test_ctrl_s_cycles_recent_title_and_message_count():
    picker = state()
    assert ids(picker) == ["s-parser", "s-docs", "s-test"]
    picker.press("c-s")
    assert picker.sort == "title" and ids(picker) == ["s-test", "s-docs", "s-parser"]
    assert texts(picker)[0] == "this workspace · 3 of 3 sessions · sorted by title"
    picker.press("c-s")
    assert picker.sort == "messages" and ids(picker) == ["s-docs", "s-parser", "s-test"]
    assert texts(picker)[0].endswith("sorted by message count")
    picker.press("c-s")
    assert picker.sort == "recent" and ids(picker) == ["s-parser", "s-docs", "s-test"]


def test_title_order_puts_sessions_without_a_request_last():
    empty = summary("s-empty", "", "2026-03-01T11:59:00Z", 0)
    picker = state(here=(empty, PARSER, DOCS))
    picker.press("c-s")
    assert ids(picker) == ["s-docs", "s-parser", "s-empty"]
    assert texts(picker)[3].startswith("❯ (no request yet)"), "the selection stays on its session"


def test_ctrl_n_shows_named_sessions_only():
    picker = state()
    picker.press("c-n")
    assert ids(picker) == ["s-docs"] and "named only" in texts(picker)[0] and "Ctrl-N all" in texts(picker)[-1]
    picker.press("c-n")
    assert ids(picker) == ["s-parser", "s-docs", "s-test"]


def test_ctrl_p_shows_each_sessions_workspace_path():
    picker = state()
    picker.press("c-p")
    assert all(row.endswith(f"  {HERE}") for row in texts(picker)[1:4])
    picker.press("tab")
    assert texts(picker)[1].endswith(f"  {THERE}") and "Ctrl-P no paths" in texts(picker)[-1]
    picker.press("c-p")
    assert texts(picker)[1].endswith("  [api]")


@pytest.mark.parametrize("key", ["c-r", "r"])
def test_rename_asks_the_new_name_in_its_own_line(key):
    picker = state()
    picker.press("down")
    picker.press(key) if key.startswith("c-") else picker.type(key)
    assert picker.mode == "rename" and not picker.done
    picker.type("release  notesx")
    picker.press("backspace")
    assert texts(picker)[-2:] == ["new name for docs day — write docs (s-docs): release  notes▏",
                                  "Enter confirms · Esc cancels"]
    picker.press("tab")
    assert picker.mode == "rename" and not picker.everywhere
    picker.press("enter")
    assert picker.done and picker.result == Choice("rename", "s-docs", DOCS.path, "release notes")


def test_rename_esc_cancels_and_an_empty_name_is_refused():
    picker = state()
    picker.press("c-r")
    picker.type("   ")
    picker.press("enter")
    assert not picker.done and picker.mode == "rename" and "a name cannot be empty (Esc cancels)" in texts(picker)
    picker.type("nope")
    picker.press("escape")
    assert picker.mode == "list" and not picker.done and picker.result is None
    assert "not renamed" in texts(picker)
    picker.press("down")
    assert "not renamed" not in texts(picker)


@pytest.mark.parametrize("key", ["c-x", "delete", "x"])
def test_trash_names_the_session_and_enter_confirms(key):
    picker = state()
    picker.press(key) if len(key) > 1 else picker.type(key)
    assert picker.mode == "trash" and not picker.done
    assert texts(picker)[-1] == "trash fix the parser bug #bug (s-parser)? Enter confirms · Esc cancels"
    picker.type("n")
    picker.press("c-s")
    assert picker.mode == "trash" and picker.sort == "recent" and not picker.done
    picker.press("enter")
    assert picker.result == Choice("trash", "s-parser", PARSER.path)


def test_trash_esc_cancels():
    picker = state()
    picker.press("c-x")
    picker.press("escape")
    assert picker.mode == "list" and not picker.done and "not trashed" in texts(picker)


def test_the_current_session_cannot_be_trashed():
    picker = state(current="s-parser")
    for key in ("c-x", "delete"):
        picker.press(key)
        assert picker.mode == "list" and "the current session cannot be trashed (/new first)" in texts(picker)
    picker.type("x")
    picker.press("enter")
    assert picker.result == Choice("resume", "s-parser", PARSER.path)


def test_filter_uses_the_sessions_list_query_language():
    picker = state()
    picker.type("/")
    assert picker.mode == "filter"

    def found(query: str) -> list[str]:
        picker.query = ""
        picker.type(query)
        return ids(picker)

    assert found("parser") == ["s-parser"]
    assert found("PARSER bug") == ["s-parser"]
    assert found("docs") == ["s-docs"]
    assert found('"the parser"') == ["s-parser"]
    assert found('"The Parser"') == []
    assert found("re:^add a") == ["s-test"]
    assert found("re:t$") == ["s-test"]
    assert found("2026-02-27") == ["s-test"]
    assert found("s-te") == ["s-test"]
    assert texts(picker)[-3].startswith('filter: s-te▏  words · "exact phrase" · re:regex · Esc done')


def test_an_unfinished_query_keeps_the_list_and_says_why():
    picker = state()
    picker.type("/")
    picker.type('"the par')
    assert ids(picker) == ["s-parser", "s-docs", "s-test"] and picker.query_error == "unclosed quote"
    assert texts(picker)[-3].startswith('filter: "the par▏  (unclosed quote)')
    picker.type('"')
    assert ids(picker) == ["s-parser"] and picker.query_error == ""
    picker.press("backspace")
    assert picker.query == '"the par' and ids(picker) == ["s-parser"]
    picker.press("tab")
    assert ids(picker) == ["s-parser"] and texts(picker)[0].startswith("all workspaces · 1 of 4 sessions")
    picker.query = ""
    for char in "re:(":
        picker.type(char)
    assert picker.query_error == "bad regex" and ids(picker) == ["s-zebra", "s-parser", "s-docs", "s-test"]


def test_filter_keys_edit_the_query_and_escape_leaves_the_filter_before_the_picker():
    picker = state()
    picker.type("/")
    picker.type("nxr")
    assert picker.query == "nxr" and picker.mode == "filter" and not picker.done and ids(picker) == []
    assert "  (no session matches)" in texts(picker)
    for _ in "nxr":
        picker.press("backspace")
    picker.type("zebra")
    picker.press("tab")
    assert ids(picker) == ["s-zebra"]
    picker.press("escape")
    assert picker.mode == "list" and not picker.done and "filter: zebra" in texts(picker)[0]
    picker.press("escape")
    assert picker.done and picker.result is None


def test_enter_resumes_and_n_starts_a_new_session():
    picker = state()
    picker.press("down")
    picker.press("enter")
    assert picker.result == Choice("resume", "s-docs", DOCS.path)
    picker = state()
    picker.type("n")
    assert picker.result == Choice("new")


def test_the_same_picker_forks_on_enter():
    picker = state(enter_action="fork")
    assert texts(picker)[-2] == "↑↓ Enter fork · / filter · Ctrl-R rename · Ctrl-X trash · Esc leave"
    picker.type("n")
    assert not picker.done
    picker.press("pagedown")
    picker.press("enter")
    assert picker.result == Choice("fork", "s-test", TEST.path)


def test_empty_scopes_say_so_and_keys_need_a_selection():
    picker = state(here=())
    assert texts(picker)[1] == "  (no sessions in this workspace · Tab: all)"
    for key in ("enter", "c-r", "c-x"):
        picker.press(key)
        assert not picker.done and picker.mode == "list" and "no session selected" in texts(picker)
    picker.press("tab")
    assert ids(picker) == ["s-zebra"]


def test_ctrl_c_leaves_from_any_line():
    picker = state()
    picker.press("c-r")
    picker.press("c-c")
    assert picker.done and picker.result is None


def test_reload_reads_the_sessions_again_and_keeps_the_view():
    loader = Loader()
    picker = PickerState(loader, NOW)
    picker.press("c-s")
    picker.press("c-x")
    picker.press("enter")
    loader.here.remove(TEST)
    picker.reload()
    assert not picker.done and picker.result is None and picker.mode == "list"
    assert picker.sort == "title" and ids(picker) == ["s-docs", "s-parser"]
    assert loader.calls == [False, False]


def test_labels_from_the_log_are_sanitized():
    hostile = summary("s-evil", "look \x1b]52;c;cGF3bmVk\x07here\x1b[2J", "2026-03-01T11:00:00Z")
    assert "\x1b" not in "".join(texts(state(here=(hostile,))))


# --- the real prompt_toolkit application ----------------------------------------------------------------------------

def write_log(store: Store, workspace: Path, session_id: str, request: str, when: float) -> Path:
    log = store.new_log_path(workspace, session_id)
    journal = Journal.create(log, {"session_id": session_id, "workspace": str(workspace)}, lambda: when)
    journal.append("entry", id="e1", parent=None, kind="user", message={"role": "user", "content": request})
    journal.close()
    return log


@pytest.fixture
def on_disk(tmp_path):
    """Two sessions here, one elsewhere, read through the catalog as the REPL reads them."""
    store = Store(tmp_path / "sessions", tmp_path)
    here, there = tmp_path / "app", tmp_path / "api"
    logs = {"old": write_log(store, here, "20260301T100000-000-aaaaaa", "older request", NOW - 7200),
            "new": write_log(store, here, "20260301T110000-000-bbbbbb", "newer request", NOW - 3600),
            "far": write_log(store, there, "20260301T115000-000-cccccc", "elsewhere", NOW - 600)}

    def load(everywhere: bool) -> list[Summary]:
        logs_, scope = (store.all_sessions(), None) if everywhere else (store.sessions_of(here),
                                                                        [store.workspace_dir(here)])
        return catalog.summaries(store.root, logs_, scope).sessions

    return logs, load


def run_picker(picker: PickerState, keys: str, close: bool = True) -> Choice | None:
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        if close:
            pipe.close()
        return pick(picker, pipe, DummyOutput())


def test_pick_drives_every_toggle_and_renames(on_disk):
    logs, load = on_disk
    picker = PickerState(load, NOW)
    choice = run_picker(picker, "\t\x13\x13\x0e\x0e\x10\x1b[B\x12new name\x7f\x7fme\r")
    assert picker.everywhere and picker.sort == "messages" and not picker.named_only and picker.paths
    assert choice == Choice("rename", logs["new"].stem, str(logs["new"]), "new name")


def test_pick_trashes_with_ctrl_x_or_delete_after_enter(on_disk):
    logs, load = on_disk
    assert run_picker(PickerState(load, NOW), "\x18\r") == Choice("trash", logs["new"].stem, str(logs["new"]))
    assert run_picker(PickerState(load, NOW), "\x1b[B\x1b[3~\r") == Choice("trash", logs["old"].stem, str(logs["old"]))


def test_pick_filters_and_resumes_or_forks(on_disk):
    logs, load = on_disk
    assert run_picker(PickerState(load, NOW), "\t/elsewhere\r") == Choice("resume", logs["far"].stem, str(logs["far"]))
    forking = PickerState(load, NOW, enter_action="fork")
    assert run_picker(forking, "nx\x1bx\x1b\x1b[B\r") == Choice("fork", logs["old"].stem, str(logs["old"]))


def test_pick_escape_cancels_the_trash_line_then_leaves(on_disk):
    _, load = on_disk
    picker = PickerState(load, NOW)
    with create_pipe_input() as pipe:
        # A lone final Esc is told from the start of a sequence by a timeout; the failsafe ends a hung picker.
        failsafe = threading.Timer(10, pipe.close)
        failsafe.start()
        pipe.send_text("\x18\x1b\x1b")
        began = time.monotonic()
        try:
            assert pick(picker, pipe, DummyOutput()) is None
        finally:
            failsafe.cancel()
    assert time.monotonic() - began < 5 and picker.mode == "list" and picker.done


def test_pick_end_of_input_chooses_nothing(on_disk):
    _, load = on_disk
    picker = PickerState(load, NOW)
    assert run_picker(picker, "\x12half a na") is None and picker.done
