"""process: start, list, log and stop background processes, with every start and exit journaled."""

import stat

import pytest

from khaelor.tools import stop_background
from khaelor.tools.base import ToolError
from khaelor.tools.process import run_process
from tests.test_tools_files import make_ctx
from tests.test_tools_shell import gone, wait_for


@pytest.fixture
def env(tmp_path):
    ctx, records = make_ctx(tmp_path)
    yield ctx, records
    stop_background(ctx)


def exits(records: list[tuple[str, dict]]) -> list[dict]:
    return [fields for kind, fields in records if kind == "process_exit"]


def test_start_log_list_stop(env):
    ctx, records = env
    command = "echo ready; sleep 30 & echo $! > child.pid; wait"
    assert run_process(ctx, {"action": "start", "command": command}).startswith("started p1 (pid ")
    kind, start = records[0]
    log = ctx.process_log_dir / "p1.log"
    assert kind == "process_start" and start["id"] == "p1" and start["command"] == command and start["log"] == str(log)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600 and stat.S_IMODE(ctx.process_log_dir.stat().st_mode) == 0o700
    assert wait_for(lambda: "ready" in run_process(ctx, {"action": "log", "id": "p1"}))
    assert run_process(ctx, {"action": "log", "id": "p1"}) == f"p1 (running), log {log}:\nready\n"
    listing = run_process(ctx, {"action": "list"}).splitlines()
    assert listing[1].split()[:3] == ["p1", str(start["pid"]), "running"] and listing[1].endswith(command)
    pid_file = ctx.workspace / "child.pid"
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"))
    child = int(pid_file.read_text())
    assert run_process(ctx, {"action": "stop", "id": "p1"}).startswith(f"stopped p1 (pid {start['pid']}")
    assert wait_for(lambda: gone(child), 2)
    assert exits(records) == [{"id": "p1", "pid": start["pid"], "signal": "SIGTERM", "stopped": True}]
    assert "killed by SIGTERM" in run_process(ctx, {"action": "list"})


def test_exit_by_itself_is_recorded_once_by_the_watcher(env):
    ctx, records = env
    run_process(ctx, {"action": "start", "command": "echo bye; exit 3"})
    assert wait_for(lambda: exits(records))
    assert exits(records) == [{"id": "p1", "pid": records[0][1]["pid"], "exit_code": 3}]
    assert run_process(ctx, {"action": "stop", "id": "p1"}) == "p1 had already ended (exit 3)"
    assert run_process(ctx, {"action": "log", "id": "p1"}).endswith("bye\n")
    assert len(exits(records)) == 1


def test_ids_are_unique_and_skip_old_logs(env):
    ctx, _ = env
    ctx.process_log_dir.mkdir(parents=True)
    (ctx.process_log_dir / "p1.log").write_text("from an earlier run\n")
    first = run_process(ctx, {"action": "start", "command": "true"})
    second = run_process(ctx, {"action": "start", "command": "true"})
    assert first.startswith("started p2 ") and second.startswith("started p3 ")
    assert (ctx.process_log_dir / "p1.log").read_text() == "from an earlier run\n"


def test_log_is_bounded(tmp_path):
    ctx, records = make_ctx(tmp_path, max_inline=500)
    run_process(ctx, {"action": "start", "command": "seq 1 5000"})
    assert wait_for(lambda: exits(records))
    out = run_process(ctx, {"action": "log", "id": "p1"})
    assert len(out) < 700 and "earlier bytes not shown" in out and out.endswith("4999\n5000\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"action": "restart"}, "action must be one of start, list, log, stop"),
        ({"action": "start"}, "start needs command"),
        ({"action": "stop"}, "stop needs id"),
        ({"action": "log", "id": "p9"}, "no background process 'p9' in this session \\(known: none\\)"),
    ],
)
def test_bad_arguments(env, args, message):
    ctx, _ = env
    with pytest.raises(ToolError, match=message):
        run_process(ctx, args)


def test_stop_background_stops_every_running_process(env):
    ctx, records = env
    assert run_process(ctx, {"action": "list"}) == "no background processes"
    for _ in range(2):
        run_process(ctx, {"action": "start", "command": "sleep 30"})
    run_process(ctx, {"action": "start", "command": "true"})
    assert wait_for(lambda: exits(records))
    assert stop_background(ctx) == ["p1", "p2"]
    assert sorted(e["id"] for e in exits(records) if e.get("stopped")) == ["p1", "p2"]
    assert stop_background(ctx) == []
