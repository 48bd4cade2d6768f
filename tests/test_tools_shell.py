"""bash: output inline or spilled, exit codes, timeouts and cancels that kill the whole group."""

import os
import signal
import stat
import threading
import time
from pathlib import Path

import pytest

from khaelor.errors import Cancelled
from khaelor.tools.base import ToolError
from khaelor.tools.shell import head_and_tail, kill_group, run_bash, spawn
from tests.test_tools_files import make_ctx


def gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie nobody reaps counts as ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return fields[0] in ("Z", "X")


def wait_for(predicate, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def child_pid(workspace: Path) -> int:
    """The pid a test command wrote to child.pid, once it is there."""
    pid_file = workspace / "child.pid"
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"))
    return int(pid_file.read_text())


def once_started(workspace: Path, action) -> None:
    """Call `action` from another thread as soon as the test command has written child.pid."""
    threading.Thread(target=lambda: (child_pid(workspace), action()), daemon=True).start()


@pytest.fixture
def env(tmp_path):
    return make_ctx(tmp_path)


def test_output_inline_with_records_and_no_leftover_file(env):
    ctx, records = env
    assert run_bash(ctx, {"command": "echo out; echo err >&2; pwd"}) == f"out\nerr\n{ctx.workspace}\n"
    (start_kind, start), (exit_kind, end) = records
    assert start_kind == "process_start" and start["command"].startswith("echo out") and start["call_id"] == "toolu_1"
    assert exit_kind == "process_exit" and end == {"call_id": "toolu_1", "pid": start["pid"], "exit_code": 0}
    assert list(ctx.tool_output_dir.iterdir()) == []
    assert stat.S_IMODE(ctx.tool_output_dir.stat().st_mode) == 0o700


def test_no_output_and_closed_stdin(env):
    ctx, _ = env
    assert run_bash(ctx, {"command": "cat"}) == "(no output)"


def test_nonzero_exit_is_an_error_with_the_output(env):
    ctx, records = env
    with pytest.raises(ToolError) as err:
        run_bash(ctx, {"command": "echo failing; exit 3"})
    assert str(err.value) == "failing\n\nexit code 3"
    assert records[-1][1]["exit_code"] == 3


def test_ten_megabytes_are_spilled_not_inlined(env):
    ctx, _ = env
    out = run_bash(ctx, {"command": "head -c 10000000 /dev/zero | tr '\\0' x; echo END"})
    spill = ctx.tool_output_dir / "toolu_1.log"
    assert spill.stat().st_size == 10_000_004
    assert stat.S_IMODE(spill.stat().st_mode) == 0o600
    assert len(out) <= ctx.max_inline + 200
    assert f"bytes omitted; full output: {spill}]" in out
    assert out.startswith("xxxx") and out.endswith("xxEND\n")


def test_multibyte_output_is_measured_in_characters(tmp_path):
    ctx, _ = make_ctx(tmp_path, max_inline=100)
    assert run_bash(ctx, {"command": "printf 'é%.0s' $(seq 80)"}) == "é" * 80  # 160 bytes, 80 chars
    out = run_bash(ctx, {"command": "printf 'é%.0s' $(seq 300)"})
    assert "bytes omitted" in out and "\ufffd" not in out


def test_head_and_tail_never_split_a_character(tmp_path):
    spill = tmp_path / "s.log"
    spill.write_bytes("€".encode() * 1000)
    text = head_and_tail(spill, 3000, 101)
    head, _, tail = text.partition("\n[…")
    assert set(head) == {"€"} and set(tail.split("]\n", 1)[1]) == {"€"}


def test_timeout_kills_the_whole_group(env):
    ctx, records = env
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 1s"):
        run_bash(ctx, {"command": "sleep 30 & echo $! > child.pid; echo waiting; wait", "timeout": 1})
    assert time.monotonic() - started < 5
    assert wait_for(lambda: gone(child_pid(ctx.workspace)), 2)
    assert records[-1][1]["timed_out"] is True


def test_timeout_is_capped_by_the_context(tmp_path):
    ctx, _ = make_ctx(tmp_path, bash_timeout=0.3)
    with pytest.raises(ToolError, match="timed out after 0.3s"):
        run_bash(ctx, {"command": "sleep 10", "timeout": 100})


@pytest.mark.parametrize("timeout", [0, -1, "5", True, float("nan")])
def test_bad_timeout(env, timeout):
    ctx, _ = env
    with pytest.raises(ToolError, match="timeout must be a positive number"):
        run_bash(ctx, {"command": "true", "timeout": timeout})


def test_bad_command(env):
    ctx, _ = env
    with pytest.raises(ToolError, match="command must be a non-empty string"):
        run_bash(ctx, {"command": ["ls"]})


def test_cancel_kills_the_group_and_raises(env):
    ctx, records = env
    once_started(ctx.workspace, ctx.cancel.set)
    with pytest.raises(Cancelled):
        run_bash(ctx, {"command": "sleep 30 & echo $! > child.pid; wait"})
    assert wait_for(lambda: gone(child_pid(ctx.workspace)), 2)
    assert records[-1][0] == "process_exit" and records[-1][1]["interrupted"] == "Cancelled"
    assert list(ctx.tool_output_dir.iterdir()) == []


class Alarm(Exception):
    pass


def test_exception_from_a_signal_handler_kills_the_group(env):
    ctx, records = env

    def on_alarm(signum, frame):
        raise Alarm()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    main = threading.get_ident()
    try:
        once_started(ctx.workspace, lambda: signal.pthread_kill(main, signal.SIGALRM))
        with pytest.raises(Alarm):
            run_bash(ctx, {"command": "sleep 30 & echo $! > child.pid; wait"})
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert wait_for(lambda: gone(child_pid(ctx.workspace)), 2)
    assert records[-1][1]["interrupted"] == "Alarm"


def test_kill_group_escalates_to_sigkill(tmp_path):
    log = open(tmp_path / "log", "wb")
    proc = spawn(["/bin/sh", "-c", "trap '' TERM; echo ready; sleep 30"], tmp_path, log)
    assert wait_for(lambda: b"ready" in (tmp_path / "log").read_bytes())
    started = time.monotonic()
    kill_group(proc, grace=0.2)
    assert proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 2
    log.close()
