"""`khaelor doctor`: one line per check, a fix hint for anything not ok, exit 1 on any fail."""

import os
from pathlib import Path

from tests.conftest import TEST_KEY, run_khaelor
from tests.fakeapi import reply, text


def doctor(cwd: Path, api=None, **extra) -> tuple[int, dict[str, str]]:
    done = run_khaelor(["doctor"], cwd, api, **extra)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(line.split()[0] in ("ok", "warn", "fail") for line in lines), done.stdout
    return done.returncode, {line.split()[1]: line for line in lines}


def new_session(api, workspace: Path, home: Path) -> Path:
    api.script(reply(text("ok")))
    assert run_khaelor(["-p", "hello"], workspace, api).returncode == 0
    return next(home.glob("sessions/*/*.jsonl"))


def test_a_healthy_setup_passes_without_showing_the_key(fake_api, workspace, khaelor_home):
    new_session(fake_api, workspace, khaelor_home)
    run_khaelor(["sessions", "list"], workspace)
    status, checks = doctor(workspace, fake_api)
    assert status == 0, checks
    assert set(checks) == {"python", "dependencies", "credentials", "config", "store", "catalog", "logs",
                           "artifacts", "git"}
    assert checks["credentials"].startswith("ok") and "ANTHROPIC_API_KEY is set" in checks["credentials"]
    assert TEST_KEY not in "".join(checks.values())
    assert checks["catalog"].startswith("ok") and "1 session(s) indexed" in checks["catalog"]
    assert checks["logs"].startswith("ok    logs         1 session log(s)")


def test_missing_credentials_fail_with_a_hint(workspace):
    status, checks = doctor(workspace)
    assert status == 1
    assert checks["credentials"].startswith("fail") and "fix: export ANTHROPIC_API_KEY" in checks["credentials"]


def test_a_broken_config_file_is_named_with_its_line(fake_api, workspace):
    (workspace / ".khaelor").mkdir()
    (workspace / ".khaelor" / "config.yaml").write_text("model: x\npermissions: [unclosed\n")
    status, checks = doctor(workspace, fake_api)
    assert status == 1
    assert checks["config"].startswith("fail") and "config.yaml" in checks["config"] and "line" in checks["config"]


def test_loose_store_permissions_fail(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home)
    os.chmod(log, 0o644)
    status, checks = doctor(workspace, fake_api)
    assert status == 1
    assert checks["store"].startswith("fail") and str(log) in checks["store"] and "chmod -R go-rwx" in checks["store"]


def test_torn_logs_warn_and_corrupt_logs_fail(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home)
    original = log.read_bytes()
    log.write_bytes(original + b'{"type":"ent')
    status, checks = doctor(workspace, fake_api)
    assert status == 0 and checks["logs"].startswith("warn") and f"sessions repair {log.stem}" in checks["logs"]
    lines = original.split(b"\n")
    lines[1] = b"[1, 2]"
    log.write_bytes(b"\n".join(lines))
    status, checks = doctor(workspace, fake_api)
    assert status == 1 and checks["logs"].startswith("fail") and "line 2: not a record" in checks["logs"]


def test_a_garbage_catalog_warns_and_is_left_alone(fake_api, workspace, khaelor_home):
    new_session(fake_api, workspace, khaelor_home)
    garbage = khaelor_home / "sessions" / ".catalog" / "sessions-v1.sqlite3"
    garbage.parent.mkdir(mode=0o700)
    garbage.write_bytes(b"garbage" * 200)
    os.chmod(garbage, 0o600)
    status, checks = doctor(workspace, fake_api)
    assert status == 0 and checks["catalog"].startswith("warn") and "rebuilds it" in checks["catalog"]
    assert garbage.read_bytes() == b"garbage" * 200


def test_artifacts_over_the_cap_warn(fake_api, workspace, khaelor_home):
    new_session(fake_api, workspace, khaelor_home)
    spilled = khaelor_home / "tool-output" / "20260101T000000-000-abcdef"
    spilled.mkdir(parents=True, mode=0o700)
    (spilled / "out.txt").write_bytes(b"x" * 5000)
    (khaelor_home / "config.yaml").write_text("tool_output:\n  cap_total: 1000\n")
    status, checks = doctor(workspace, fake_api)
    assert status == 0 and checks["artifacts"].startswith("warn") and "over the 1,000 byte cap" in checks["artifacts"]


def test_the_cap_is_on_the_total_not_each_session(fake_api, workspace, khaelor_home):
    new_session(fake_api, workspace, khaelor_home)
    for session_id in ("20260101T000000-000-aaaaaa", "20260102T000000-000-bbbbbb"):
        spilled = khaelor_home / "tool-output" / session_id
        spilled.mkdir(parents=True, mode=0o700)
        (spilled / "out.txt").write_bytes(b"x" * 5000)
    (khaelor_home / "config.yaml").write_text("tool_output:\n  cap_total: 11000\n")
    status, checks = doctor(workspace, fake_api)
    assert checks["artifacts"].startswith("ok") and "within the 11,000 byte cap in all" in checks["artifacts"]
    (khaelor_home / "config.yaml").write_text("tool_output:\n  cap_total: 9000\n")
    status, checks = doctor(workspace, fake_api)
    assert status == 0 and checks["artifacts"].startswith("warn") and "3 session(s), over the 9,000 byte cap" in \
        checks["artifacts"] and "fix: khaelor sessions gc" in checks["artifacts"]


def test_git_missing_is_a_warning(fake_api, workspace, tmp_path):
    empty = tmp_path / "no-tools"
    empty.mkdir()
    status, checks = doctor(workspace, fake_api, PATH=str(empty))
    assert checks["git"].startswith("warn") and "fix: install git" in checks["git"]


def test_an_unknown_option_is_a_usage_error(workspace):
    done = run_khaelor(["doctor", "--bogus"], workspace)
    assert done.returncode == 2 and done.stderr.startswith("khaelor: error: unrecognized arguments: --bogus")
    assert "Traceback" not in done.stderr
