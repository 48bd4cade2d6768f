"""Bad input through print mode: each gives a clear message to the model or the person, never a traceback."""

import json
import os

from tests.conftest import run_khaelor
from tests.fakeapi import reply, text, tool_use


def last_result(api) -> dict:
    return api.message_requests[-1].body["messages"][-1]["content"][0]


def run_bypass(api, workspace, *blocks_per_turn):
    api.script(*[reply(*blocks) for blocks in blocks_per_turn], reply(text("done")))
    done = run_khaelor(["-p", "task", "--permission-mode", "bypass"], workspace, api)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def test_binary_file_read_is_refused(fake_api, workspace):
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    run_bypass(fake_api, workspace, [tool_use("read", {"path": "blob.bin"})])
    result = last_result(fake_api)
    assert result["is_error"] is True and "binary file (300 bytes)" in result["content"]


def test_ten_megabytes_of_bash_output_is_spilled(fake_api, workspace, khaelor_home):
    run_bypass(fake_api, workspace, [tool_use("bash", {"command": "head -c 10000000 /dev/zero | tr '\\0' a"})])
    result = last_result(fake_api)
    assert not result.get("is_error")
    assert len(result["content"]) < 40_000
    [spill] = list((khaelor_home / "tool-output").glob("*/*"))
    assert spill.stat().st_size == 10_000_000 and str(spill) in result["content"]
    assert oct(spill.stat().st_mode & 0o777) == "0o600"


def test_non_unique_edit_reports_the_count(fake_api, workspace):
    (workspace / "f.txt").write_text("aa aa aa\n")
    run_bypass(fake_api, workspace, [tool_use("read", {"path": "f.txt"})],
               [tool_use("edit", {"path": "f.txt", "old_string": "aa", "new_string": "b"})])
    result = last_result(fake_api)
    assert result["is_error"] is True and "3 times" in result["content"]
    assert (workspace / "f.txt").read_text() == "aa aa aa\n"


def test_edit_of_a_file_changed_since_read_is_refused(fake_api, workspace):
    (workspace / "f.txt").write_text("one\n")
    run_bypass(fake_api, workspace, [tool_use("read", {"path": "f.txt"})],
               [tool_use("bash", {"command": "echo two >> f.txt"})],
               [tool_use("edit", {"path": "f.txt", "old_string": "one", "new_string": "1"})])
    result = last_result(fake_api)
    assert result["is_error"] is True and "changed since last read" in result["content"]
    assert (workspace / "f.txt").read_text() == "one\ntwo\n"


def test_read_state_survives_resume(fake_api, workspace):
    (workspace / "f.txt").write_text("one\n")
    run_bypass(fake_api, workspace, [tool_use("read", {"path": "f.txt"})])
    fake_api.script(reply(tool_use("edit", {"path": "f.txt", "old_string": "one", "new_string": "1"})), reply(text("ok")))
    done = run_khaelor(["-p", "-c", "edit it", "--permission-mode", "bypass"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    assert (workspace / "f.txt").read_text() == "1\n"


def test_write_over_an_unread_file_is_refused(fake_api, workspace):
    (workspace / "keep.txt").write_text("precious\n")
    run_bypass(fake_api, workspace, [tool_use("write", {"path": "keep.txt", "content": "gone"})])
    assert last_result(fake_api)["is_error"] is True
    assert (workspace / "keep.txt").read_text() == "precious\n"


def test_unknown_tool_and_bad_input_shape_are_tool_errors(fake_api, workspace):
    run_bypass(fake_api, workspace, [tool_use("teleport", {"to": "mars"})],
               [tool_use("read", {"path": 42})])
    requests = fake_api.message_requests
    first = requests[1].body["messages"][-1]["content"][0]
    assert first["is_error"] is True and "teleport" in first["content"]
    assert last_result(fake_api)["is_error"] is True


def test_escape_sequences_from_the_model_do_not_reach_the_log_raw(fake_api, workspace, khaelor_home):
    hostile = "ok \x1b]52;c;cGF3bmVk\x07 \x1b[2J done"
    fake_api.script(reply(text(hostile)))
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 0
    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    assert b"\x1b" not in log.read_bytes()  # JSON escapes control characters


def test_invalid_yaml_config_is_one_line_with_file_and_line(fake_api, workspace):
    config = workspace / ".khaelor" / "config.yaml"
    config.parent.mkdir()
    config.write_text("model: sonnet\npermissions:\n  allow: [bash\n")
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"khaelor: error: {config}:") and "invalid YAML" in line


def test_wrong_config_type_names_the_key(fake_api, workspace):
    config = workspace / ".khaelor" / "config.yaml"
    config.parent.mkdir()
    config.write_text("bash:\n  timeout: soon\n")
    done = run_khaelor(["-p", "hi"], workspace, fake_api)
    assert done.returncode == 2
    assert f"{config}:2: 'bash.timeout' must be a number" in done.stderr


def test_unknown_allow_rule_tool_is_a_usage_error(fake_api, workspace):
    done = run_khaelor(["-p", "hi", "--allow", "bsh"], workspace, fake_api)
    assert done.returncode == 2
    assert "bash" in done.stderr and "Traceback" not in done.stderr


def test_invalid_utf8_on_stdin_is_a_usage_error(fake_api, workspace):
    import subprocess
    import sys

    from tests.conftest import khaelor_env

    done = subprocess.run([sys.executable, "-m", "khaelor", "-p"], cwd=workspace, env=khaelor_env(fake_api),
                          input=b"\xff\xfe bad", capture_output=True, timeout=60)
    assert done.returncode == 2
    assert b"not valid UTF-8" in done.stderr


def test_session_in_use_is_reported_with_the_pid(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("one")))
    assert run_khaelor(["-p", "first"], workspace, fake_api).returncode == 0
    from khaelor.journal import Journal

    [log] = list(khaelor_home.glob("sessions/*/*.jsonl"))
    holder, _ = Journal.open(log, lambda: 0.0)
    try:
        done = run_khaelor(["-p", "-c", "second"], workspace, fake_api)
    finally:
        holder.close()
    assert done.returncode == 1
    assert f"in use by pid {os.getpid()}" in done.stderr


def test_internal_errors_are_one_line_without_debug(workspace):
    done = run_khaelor(["-p", "hi", "--session-dir", "/proc/self/forbidden"], workspace, None,
                       ANTHROPIC_API_KEY="k")
    assert done.returncode in (1, 2)
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) <= 2


def test_json_result_is_valid_even_on_error(fake_api, workspace):
    from tests.fakeapi import error_response

    fake_api.script(error_response(400, "prompt is too long: 300000 tokens > 200000 maximum"))
    done = run_khaelor(["-p", "hi", "--output-format", "json"], workspace, fake_api)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["is_error"] and "prompt is too long" in result["result"]
