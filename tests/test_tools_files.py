"""read, write and edit: numbered output, bounds, binary refusal and the file-state rules."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from khaelor.filestate import observe
from khaelor.tools import all_tools, get_tool
from khaelor.tools.base import ToolContext, ToolError
from khaelor.tools.files import MAX_FILE_BYTES, run_edit, run_read, run_write


def make_ctx(tmp_path: Path, **options) -> tuple[ToolContext, list[tuple[str, dict]]]:
    """A context on a fresh workspace under `tmp_path` whose records land in the returned list."""
    records: list[tuple[str, dict]] = []
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    ctx = ToolContext(
        workspace=workspace,
        session_id="s1",
        tool_output_dir=tmp_path / "out" / "s1",
        process_log_dir=tmp_path / "logs" / "s1",
        record=lambda kind, fields: records.append((kind, fields)),
        call_id="toolu_1",
        **options,
    )
    return ctx, records


@pytest.fixture
def env(tmp_path):
    return make_ctx(tmp_path)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_registry_order_schemas_and_mutates():
    tools = all_tools()
    assert [t.name for t in tools] == ["read", "write", "edit", "bash", "glob", "grep", "ls", "process"]
    assert {t.name for t in tools if t.mutates} == {"write", "edit", "bash", "process"}
    assert get_tool("edit") is tools[2] and get_tool("nope") is None
    fields = {t.name: set(t.input_schema["properties"]) for t in tools}
    assert fields["edit"] == {"path", "old_string", "new_string", "replace_all"}
    assert fields["process"] == {"action", "command", "id"}
    assert all("required" in t.input_schema for t in tools)
    text = json.dumps([t.definition() for t in tools], sort_keys=True)
    assert "/tmp" not in text and str(Path.home()) not in text


def test_read_numbers_lines_and_records_the_whole_file(env):
    ctx, records = env
    data = b"alpha\nbeta\ngamma\n"
    (ctx.workspace / "f.txt").write_bytes(data)
    assert run_read(ctx, {"path": "f.txt"}) == "     1\talpha\n     2\tbeta\n     3\tgamma"
    path = str(ctx.workspace / "f.txt")
    fields = {"path": path, "size": 17, "mtime_ns": os.stat(path).st_mtime_ns, "sha256": sha(data)}
    assert records == [("file_read", fields)]
    assert ctx.file_state.known[path].sha256 == sha(data)


def test_read_offset_and_limit_say_where_to_continue(env):
    ctx, records = env
    data = "".join(f"line {n}\n" for n in range(1, 11)).encode()
    (ctx.workspace / "f.txt").write_bytes(data)
    out = run_read(ctx, {"path": "f.txt", "offset": 4, "limit": 2})
    assert out.splitlines()[:2] == ["     4\tline 4", "     5\tline 5"]
    assert "continue with offset=6" in out
    assert records[0][1]["sha256"] == sha(data)
    with pytest.raises(ToolError, match="past the end of the file \\(10 lines\\)"):
        run_read(ctx, {"path": "f.txt", "offset": 11})


@pytest.mark.parametrize("args", [{"offset": "3"}, {"offset": True}, {"limit": 0}, {"offset": 1.5}])
def test_read_rejects_bad_numbers(env, args):
    ctx, _ = env
    (ctx.workspace / "f.txt").write_text("x\n")
    with pytest.raises(ToolError, match="offset|limit"):
        run_read(ctx, {"path": "f.txt", **args})


def test_read_cuts_long_lines_and_bounds_output(tmp_path):
    ctx, _ = make_ctx(tmp_path, max_inline=3000)
    (ctx.workspace / "long.txt").write_text("y" * 2500 + "\n" + "short\n" * 400)
    out = run_read(ctx, {"path": "long.txt"})
    assert "… [line cut: 500 more characters]" in out
    assert len(out) <= 3000
    next_offset = int(out.rsplit("offset=", 1)[1].rstrip("]"))
    assert out.splitlines()[-2].startswith(f"{next_offset - 1:>6}\t")
    assert run_read(ctx, {"path": "long.txt", "offset": next_offset}).startswith(f"{next_offset:>6}\tshort")


def test_read_empty_file(env):
    ctx, records = env
    (ctx.workspace / "empty").write_bytes(b"")
    assert run_read(ctx, {"path": "empty"}) == "empty is empty (0 bytes)"
    assert records[0][1]["size"] == 0


@pytest.mark.parametrize("data", [b"\x7fELF\x00\x01\x02" + b"x" * 100, "caf\u00e9\n".encode("latin-1")])
def test_read_refuses_binary_and_invalid_utf8(env, data):
    ctx, records = env
    (ctx.workspace / "blob").write_bytes(data)
    with pytest.raises(ToolError) as err:
        run_read(ctx, {"path": "blob"})
    assert str(err.value) == f"blob: binary file ({len(data)} bytes) — not shown"
    assert records == []


def test_read_errors_are_tool_errors(env):
    ctx, _ = env
    (ctx.workspace / "d").mkdir()
    (ctx.workspace / "f").write_text("x")
    with pytest.raises(ToolError, match="is a directory"):
        run_read(ctx, {"path": "d"})
    with pytest.raises(ToolError, match="file not found"):
        run_read(ctx, {"path": "missing.txt"})
    with pytest.raises(ToolError, match="file not found"):
        run_read(ctx, {"path": "f/below"})
    with pytest.raises(ToolError, match="path is required"):
        run_read(ctx, {})


def test_read_refuses_huge_files(env):
    ctx, _ = env
    with open(ctx.workspace / "huge", "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ToolError, match="over 50 MiB"):
        run_read(ctx, {"path": "huge"})


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files of any mode")
def test_read_permission_denied(env):
    ctx, _ = env
    secret = ctx.workspace / "secret"
    secret.write_text("x")
    secret.chmod(0)
    with pytest.raises(ToolError, match="Permission denied"):
        run_read(ctx, {"path": "secret"})


def test_write_creates_parents_and_records(env):
    ctx, records = env
    assert run_write(ctx, {"path": "a/b/new.txt", "content": "héllo\n"}) == "Wrote 7 bytes to a/b/new.txt (created)"
    path = ctx.workspace / "a/b/new.txt"
    assert path.read_text() == "héllo\n"
    kind, fields = records[0]
    assert kind == "file_modified"
    assert fields["call_id"] == "toolu_1" and fields["before"] is None
    assert fields["path"] == str(path) and fields["sha256"] == sha("héllo\n".encode())
    assert ctx.file_state.known[str(path)].sha256 == fields["sha256"]


def test_write_over_unread_file_is_refused(env):
    ctx, records = env
    (ctx.workspace / "old.txt").write_text("keep me")
    with pytest.raises(ToolError, match="has not been read in this session"):
        run_write(ctx, {"path": "old.txt", "content": "new"})
    assert (ctx.workspace / "old.txt").read_text() == "keep me"
    assert records == []


def test_write_after_read_overwrites_with_before_hash(env):
    ctx, records = env
    (ctx.workspace / "old.txt").write_bytes(b"v1")
    run_read(ctx, {"path": "old.txt"})
    assert run_write(ctx, {"path": "old.txt", "content": "v2"}).endswith("(overwrote)")
    assert records[-1][1]["before"] == sha(b"v1") and records[-1][1]["sha256"] == sha(b"v2")
    with pytest.raises(ToolError, match="is a directory"):
        run_write(ctx, {"path": ".", "content": "x"})
    with pytest.raises(ToolError, match="content must be a string"):
        run_write(ctx, {"path": "x.txt"})


def read_first(ctx: ToolContext, name: str, text: str) -> Path:
    path = ctx.workspace / name
    path.write_text(text)
    run_read(ctx, {"path": name})
    return path


def test_edit_replaces_once_and_shows_a_diff(env):
    ctx, records = env
    path = read_first(ctx, "m.py", "a = 1\nb = 2\nc = 3\n")
    out = run_edit(ctx, {"path": "m.py", "old_string": "b = 2", "new_string": "b = 20"})
    assert path.read_text() == "a = 1\nb = 20\nc = 3\n"
    assert out.splitlines()[:3] == ["Edited m.py: 1 replacement", "--- a/m.py", "+++ b/m.py"]
    assert "-b = 2\n+b = 20" in out
    fields = records[-1][1]
    assert records[-1][0] == "file_modified"
    assert fields["before"] == sha(b"a = 1\nb = 2\nc = 3\n") and fields["sha256"] == sha(path.read_bytes())
    run_edit(ctx, {"path": "m.py", "old_string": "c = 3", "new_string": "c = 30"})  # no re-read needed
    assert path.read_text().endswith("c = 30\n")


def test_edit_non_unique_names_the_count(env):
    ctx, _ = env
    path = read_first(ctx, "m.py", "x\nx\nx\n")
    with pytest.raises(ToolError) as err:
        run_edit(ctx, {"path": "m.py", "old_string": "x", "new_string": "y"})
    assert "occurs 3 times in m.py" in str(err.value) and "replace_all" in str(err.value)
    assert path.read_text() == "x\nx\nx\n"
    assert run_edit(ctx, {"path": "m.py", "old_string": "x", "new_string": "y", "replace_all": True}).startswith(
        "Edited m.py: 3 replacements"
    )
    assert path.read_text() == "y\ny\ny\n"


def test_edit_of_file_changed_on_disk_is_refused(env):
    ctx, _ = env
    path = read_first(ctx, "m.py", "one\n")
    path.write_text("someone else's\n")
    with pytest.raises(ToolError, match="changed since last read"):
        run_edit(ctx, {"path": "m.py", "old_string": "someone", "new_string": "me"})
    assert path.read_text() == "someone else's\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"old_string": "zzz", "new_string": "y"}, "old_string not found in m.py"),
        ({"old_string": "", "new_string": "y"}, "must not be empty"),
        ({"old_string": "one", "new_string": "one"}, "identical"),
        ({"old_string": "one", "new_string": "two", "replace_all": "yes"}, "replace_all must be true or false"),
        ({"old_string": "one"}, "new_string must be a string"),
    ],
)
def test_edit_bad_arguments(env, args, message):
    ctx, _ = env
    read_first(ctx, "m.py", "one\n")
    with pytest.raises(ToolError, match=message):
        run_edit(ctx, {"path": "m.py", **args})


def test_edit_missing_unread_and_binary_files(env):
    ctx, _ = env
    with pytest.raises(ToolError, match="file not found.*use write"):
        run_edit(ctx, {"path": "nope.py", "old_string": "a", "new_string": "b"})
    (ctx.workspace / "unread.py").write_text("a\n")
    with pytest.raises(ToolError, match="has not been read"):
        run_edit(ctx, {"path": "unread.py", "old_string": "a", "new_string": "b"})
    blob = ctx.workspace / "blob"
    blob.write_bytes(b"a\x00b")
    ctx.file_state.note(observe(blob))
    with pytest.raises(ToolError, match="binary file \\(3 bytes\\)"):
        run_edit(ctx, {"path": "blob", "old_string": "a", "new_string": "b"})


def test_edit_diff_is_bounded(tmp_path):
    ctx, _ = make_ctx(tmp_path, max_inline=400)
    path = read_first(ctx, "big.txt", "".join(f"row {n}\n" for n in range(200)))
    out = run_edit(ctx, {"path": "big.txt", "old_string": "row", "new_string": "ROW", "replace_all": True})
    assert len(out) <= 400 and "diff cut" in out
    assert path.read_text().count("ROW") == 200


def test_edit_keeps_a_missing_final_newline(env):
    ctx, _ = env
    path = read_first(ctx, "n.txt", "a\nb")
    out = run_edit(ctx, {"path": "n.txt", "old_string": "b", "new_string": "c"})
    assert path.read_text() == "a\nc"
    assert "\\ No newline at end of file" in out
