"""`/diff` and `sessions diff`: exactly the agent's changes, through any tool, across resume and crashes.

End to end through the real CLI, the real SDK and the fake Messages API;
attribution details through the watcher seam (a real session and tracker,
the test making the "tool" and "person" edits itself).
"""

import io
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from khaelor.attribution import Tracker, attach, snapshot_dir
from khaelor.changes import ChangeHistory, is_tracked
from khaelor.cli import main
from khaelor.diffview import DIFF_LIMIT, describe_baseline, parse_args, report, session_lines, shown
from khaelor.env import Env
from khaelor.filesnapshot import FileSnapshots
from khaelor.journal import read_log
from khaelor.session import Session
from khaelor.store import Store
from tests.conftest import run_khaelor, start_khaelor
from tests.fakeapi import FakeAPI, reply, text, tool_use
from tests.test_gitbase import git, untouchables

SUMMARY = re.compile(r"^  ([AMDR])  (.+?)  (\S+(?: \S+)*)$")
AGENTS_FOUR = {"a.txt": "M", "b.txt": "M", "created.txt": "A", "d.txt": "D"}


def summary(out: str) -> dict[str, str]:
    """path → status from the summary lines of a diff report."""
    return {m.group(2): m.group(1) for m in map(SUMMARY.match, out.splitlines()) if m}


def plant(root: Path) -> None:
    for name, body in {"a.txt": "alpha\nkeep\n", "b.txt": "beta\n", "c.txt": "gamma\n", "d.txt": "delta\n",
                       "staged.txt": "s\n", "unstaged.txt": "u\n", ".gitignore": "*.log\n"}.items():
        (root / name).write_text(body)


def git_repo_with_work(root: Path) -> None:
    """Committed files, then a stash entry and staged, unstaged, untracked and ignored work."""
    plant(root)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    (root / "c.txt").write_text("to stash\n")
    git(root, "stash", "-q")
    (root / "staged.txt").write_text("s staged\n")
    git(root, "add", "staged.txt")
    (root / "unstaged.txt").write_text("u unstaged\n")
    (root / "a.txt").write_text("alpha\nkeep\nmine, from before the session\n")
    (root / "untracked.txt").write_text("mine\n")
    (root / "noise.log").write_text("ignored\n")


def script_task(api: FakeAPI, hold_at: int, shell: str = "") -> None:
    """read + edit a.txt, sed -i b.txt, create one file and delete another with bash; reply `hold_at` is held."""
    steps = [
        reply(tool_use("read", {"path": "a.txt"})),
        reply(tool_use("edit", {"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"})),
        reply(tool_use("bash", {"command": shell + "sed -i 's/beta/BETA/' b.txt"})),
        reply(tool_use("bash", {"command": shell + "printf 'new\\n' > created.txt && rm d.txt"})),
        reply(text("done")),
    ]
    steps[hold_at] = reply(*steps[hold_at].content, hold_after=0)
    api.script(*steps)


def run_task_with_an_edit_between_calls(api: FakeAPI, root: Path, **extra) -> None:
    """The agent's task, with the test editing c.txt while the model 'thinks' between the edit and the sed."""
    script_task(api, hold_at=2, shell=extra.pop("shell", ""))
    proc = start_khaelor(["-p", "go", "--permission-mode", "bypass"], root, api, **extra)
    assert api.held.wait(60)
    (root / "c.txt").write_text("gamma, edited by the person between two tool calls\n")
    api.release()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out == "done\n", err
    assert "Traceback" not in err


def repl_diff(root: Path, api: FakeAPI, *commands: str, **extra) -> str:
    """Continue the latest session in the REPL and run slash commands there; returns stdout."""
    done = run_khaelor(["-c"], root, api, input="".join(f"{c}\n" for c in commands), **extra)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "error" not in done.stderr
    return done.stdout


def the_log(home: Path) -> Path:
    [log] = sorted(home.glob("sessions/*/*.jsonl"))
    return log


def sessions_diff(home: Path, root: Path, *args: str, stdout=None, environ=None) -> str:
    """`khaelor sessions diff ID ARGS…` (in process) for the only session; returns stdout."""
    stdout, stderr = stdout or io.StringIO(), io.StringIO()
    env = Env(stdin=io.StringIO(), stdout=stdout, stderr=stderr, cwd=root,
              environ={**os.environ, "KHAELOR_HOME": str(home), **(environ or {})})
    assert main(["sessions", "diff", the_log(home).stem[:15], *args], env) == 0, stderr.getvalue()
    return stdout.getvalue()


# --- acceptance ----------------------------------------------------------------------


def test_only_the_agents_four_changes_and_nothing_of_the_persons_is_touched(fake_api, workspace, khaelor_home):
    git_repo_with_work(workspace)
    before = untouchables(workspace)
    status_before = git(workspace, "status", "--porcelain").splitlines()
    run_task_with_an_edit_between_calls(fake_api, workspace)

    after = untouchables(workspace)
    assert {k: after[k] for k in ("stash", "refs", "head", "index", "config")} == \
           {k: before[k] for k in ("stash", "refs", "head", "index", "config")}
    expected = {line[3:]: line[:2] for line in status_before}
    expected.update({"b.txt": " M", "c.txt": " M", "d.txt": " D", "created.txt": "??"})
    assert {line[3:]: line[:2] for line in git(workspace, "status", "--porcelain").splitlines()} == expected

    cli = run_khaelor(["sessions", "diff", the_log(khaelor_home).stem], workspace)
    assert cli.returncode == 0 and cli.stderr == ""
    for out in (repl_diff(workspace, fake_api, "/diff"), cli.stdout):
        assert summary(out) == AGENTS_FOUR
        assert "-alpha\n+ALPHA\n keep\n mine, from before the session\n" in out
        for foreign in ("gamma", "staged", "unstaged", "untracked", "ignored", "! "):
            assert foreign not in out
        assert "4 files changed by the agent since the session began (+3 -3)" in out


def test_the_same_scenario_outside_git_gives_the_same_file_list(fake_api, tmp_path, khaelor_home):
    root = tmp_path / "plain"
    root.mkdir()
    plant(root)
    run_task_with_an_edit_between_calls(fake_api, root)
    out = repl_diff(root, fake_api, "/diff")
    assert summary(out) == AGENTS_FOUR
    assert "baseline: no git (not a git work tree" in out and "gamma" not in out
    assert summary(sessions_diff(khaelor_home, root, "--stat")) == AGENTS_FOUR
    folder = snapshot_dir(Store(khaelor_home / "sessions", khaelor_home), the_log(khaelor_home).stem)
    assert all(oct(p.stat().st_mode & 0o777) in ("0o700", "0o600") for p in [folder, *folder.rglob("*")])


def test_without_git_on_path_a_repository_falls_back_to_the_same_file_list(fake_api, workspace, khaelor_home, tmp_path):
    git_repo_with_work(workspace)
    empty = tmp_path / "no-programs"
    empty.mkdir()
    run_task_with_an_edit_between_calls(fake_api, workspace, PATH=str(empty), shell="PATH=/usr/bin:/bin; ")
    out = repl_diff(workspace, fake_api, "/diff --stat", PATH=str(empty))
    assert summary(out) == AGENTS_FOUR
    assert "baseline: no git (git is not installed (not found on PATH)); tracked by content" in out


def test_sigkill_then_continue_still_shows_the_full_diff(workspace, khaelor_home):
    git_repo_with_work(workspace)
    with FakeAPI() as api:
        script_task(api, hold_at=4)
        proc = start_khaelor(["-p", "go", "--permission-mode", "bypass"], workspace, api)
        assert api.held.wait(60)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        api.release()
    with FakeAPI() as api:
        out = repl_diff(workspace, api, "/diff")
    assert summary(out) == AGENTS_FOUR and "-alpha\n+ALPHA" in out


def test_a_call_killed_midway_is_settled_on_resume_as_the_agents_and_marked(workspace, khaelor_home):
    plant(workspace)
    with FakeAPI() as api:
        api.script(reply(tool_use("bash", {"command": "sed -i 's/beta/BETA/' b.txt && sleep 60"})))
        proc = start_khaelor(["-p", "go", "--permission-mode", "bypass"], workspace, api)
        deadline = time.monotonic() + 60
        while (workspace / "b.txt").read_text() == "beta\n" and time.monotonic() < deadline:
            time.sleep(0.01)
        while b'"process_start"' not in the_log(khaelor_home).read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)  # the child can finish sed before its start is journaled
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for record in read_log(the_log(khaelor_home)).records:
        if record["type"] == "process_start":
            try:
                os.killpg(record["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    with FakeAPI() as api:
        out = repl_diff(workspace, api, "/diff")
    assert summary(out) == {"b.txt": "M"}
    assert "changed during a tool call the session did not finish" in out
    [settled] = [r for r in read_log(the_log(khaelor_home)).records if r.get("interrupted")]
    assert settled["by"] == "agent" and settled["tool"] == "bash"


# --- attribution through the watcher seam -------------------------------------------------


class Live:
    """A real session and tracker; `call` runs a 'tool' between the tracker's before and after."""

    def __init__(self, root: Path, home: Path, environ: dict | None = None):
        self.root, self.store = root, Store(home / "sessions", home)
        self.environ = environ or dict(os.environ)
        self.log = self.store.new_log_path(root, "20260101T000000-000-abcdef")
        header = {"session_id": self.log.stem, "workspace": str(root)}
        self.session = Session.create(self.log, header, time.time)
        self.tracker = attach(self.session, self.store, self.environ)
        self.count = 0

    def call(self, action, name: str = "bash", arguments: dict | None = None) -> None:
        self.count += 1
        call_id = f"toolu_{self.count}"
        record = self.session.record
        record("tool_request", call_id=call_id, name=name, input=arguments or {})
        record("tool_start", call_id=call_id)
        self.tracker.before(call_id, name, arguments or {})
        action()
        self.tracker.after(call_id, name, arguments or {})
        record("tool_result", call_id=call_id, is_error=False, content="ok")

    def diff(self, arg: str = "") -> str:
        path, stat = parse_args(arg)
        return "\n".join(t for t, _ in report(self.tracker.history, self.tracker.backend, self.root, path, stat))

    def resume(self) -> None:
        self.session.journal.close()
        self.session = Session.open(self.log, time.time)
        self.tracker = attach(self.session, self.store, self.environ)


@pytest.fixture(params=["git", "files"])
def live(request, tmp_path, khaelor_home):
    """A session in a fresh git repository or in a plain directory."""
    root = tmp_path / "work"
    root.mkdir()
    if request.param == "git":
        git(tmp_path, "init", "-q", str(root))
    session = Live(root, khaelor_home)
    yield session
    session.session.journal.close()


def write(root: Path, name: str, body: str | bytes) -> None:
    (root / name).write_bytes(body if isinstance(body, bytes) else body.encode())


def test_someone_elses_edit_between_the_agents_edits_is_left_out(live):
    write(live.root, "f.txt", "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n")
    live.call(lambda: write(live.root, "f.txt", "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"))
    write(live.root, "f.txt", "ONE\ntwo\nthree\nfour\nFIVE (person)\nsix\nseven\neight\n")
    live.call(lambda: write(live.root, "f.txt", "ONE\ntwo\nthree\nfour\nFIVE (person)\nsix\nseven\nEIGHT\n"))
    out = live.diff()
    assert summary(out) == {"f.txt": "M"} and "+2 -2" in out
    assert "someone else edited it between the agent's changes" in out and "part 2 of 2" in out
    assert "-one\n+ONE" in out and "-eight\n+EIGHT" in out
    assert "+FIVE" not in out and "-five" not in out


def test_an_edit_after_the_agents_last_change_is_flagged_not_shown(live):
    write(live.root, "f.txt", "a\n")
    live.call(lambda: write(live.root, "f.txt", "agent\n"))
    write(live.root, "f.txt", "person\n")
    out = live.diff()
    assert "+agent" in out and "person" not in out
    assert "changed since the agent's last edit" in out


def test_edits_before_the_agent_touched_a_file_are_not_the_agents(live):
    write(live.root, "f.txt", "a\nb\n")
    live.call(lambda: None)
    write(live.root, "f.txt", "a (person)\nb\n")
    live.call(lambda: write(live.root, "f.txt", "a (person)\nb (agent)\n"))
    out = live.diff()
    assert "-b\n+b (agent)" in out and "+a (person)" not in out
    assert "also edited by someone else during the session" in out


def test_renames_binary_huge_and_odd_names(live):
    write(live.root, "old name.txt", "".join(f"line {i}\n" for i in range(20)))
    write(live.root, "moved.txt", "same\n")
    write(live.root, "pic.png", b"\x89PNG\0\0\0")
    write(live.root, "huge.txt", "x" * (DIFF_LIMIT + 10))
    os.makedirs(live.root / "dir")

    def agent():
        os.rename(live.root / "moved.txt", live.root / "dir" / "moved.txt")
        os.rename(live.root / "old name.txt", live.root / "new name.txt")
        write(live.root, "new name.txt", "".join(f"line {i}\n" for i in range(19)) + "changed\n")
        write(live.root, "pic.png", b"\x89PNG\0\0\1")
        write(live.root, "huge.txt", "y" * (DIFF_LIMIT + 10))
        write(live.root, "tab\tnew\nline ☃.txt", "odd\n")

    live.call(agent)
    out = live.diff()
    assert summary(out) == {"moved.txt → dir/moved.txt": "R", "old name.txt → new name.txt": "R",
                            "pic.png": "M", "huge.txt": "M", shown("tab\tnew\nline ☃.txt"): "A"}
    assert shown("tab\tnew\nline ☃.txt") == '"tab\\tnew\\nline ☃.txt"'
    assert "binary file, 7 → 7 bytes" in out and "-line 19\n+changed" in out
    assert "large file, 1,048,586 → 1,048,586 bytes; not shown (over 1 MiB)" in out
    assert "yyyy" not in out


def test_reverted_changes_and_read_only_calls_leave_nothing(live):
    write(live.root, "f.txt", "a\n")
    live.call(lambda: write(live.root, "f.txt", "b\n"))
    live.call(lambda: write(live.root, "f.txt", "a\n"))
    live.call(lambda: write(live.root, "f.txt", "by a read-only tool?\n"), name="grep")
    assert live.diff().startswith("the agent has not changed any files in this session")
    assert not is_tracked("process", {"action": "list"}) and is_tracked("process", {"action": "start"})


def test_stat_path_filter_and_modes(live):
    (live.root / "src").mkdir()
    write(live.root, "src/a.py", "x = 1\n")
    write(live.root, "run.sh", "echo\n")
    live.call(lambda: (write(live.root, "src/a.py", "x = 2\n"), os.chmod(live.root / "run.sh", 0o755)))
    assert "old mode 100644\nnew mode 100755" in live.diff("run.sh")
    stat = live.diff("--stat src")
    assert summary(stat) == {"src/a.py": "M"} and "@@" not in stat and "under src" in stat
    assert summary(live.diff("'src/a.py' --stat")) == {"src/a.py": "M"}
    assert "has not changed any files under nowhere" in live.diff("nowhere")


def test_history_survives_resume_and_edits_between_runs_are_someone_elses(live):
    write(live.root, "f.txt", "a\nb\nc\nd\ne\nf\ng\nh\n")
    live.call(lambda: write(live.root, "f.txt", "A\nb\nc\nd\ne\nf\ng\nh\n"))
    live.resume()
    write(live.root, "f.txt", "A\nb\nc\nd\ne\nf\ng\nH (person)\n")
    write(live.root, "g.txt", "person's new file\n")
    live.call(lambda: write(live.root, "f.txt", "A\nb\nc\nD\ne\nf\ng\nH (person)\n"))
    out = live.diff()
    assert summary(out) == {"f.txt": "M"} and "H (person)" not in out.split("part 2 of 2")[0]
    assert "-a\n+A" in out and "-d\n+D" in out and "+H (person)" not in out


def test_a_failed_snapshot_is_a_noted_gap_not_an_error(tmp_path, khaelor_home):
    root = tmp_path / "work"
    root.mkdir()
    git(tmp_path, "init", "-q", str(root))
    live = Live(root, khaelor_home)
    write(root, "f.txt", "a\n")
    subprocess.run(["rm", "-rf", str(root / ".git")], check=True)
    live.call(lambda: write(root, "f.txt", "b\n"))
    out = live.diff()
    assert "could not be tracked" in out and "not a git repository" in out
    live.session.journal.close()


class Flaky:
    """A backend that fails with `self.fault` when it is set, else delegates to a real one."""

    def __init__(self, real):
        self.real, self.fault = real, None

    def __getattr__(self, name):
        return getattr(self.real, name)

    def snapshot(self) -> str:
        if self.fault is not None:
            raise self.fault
        return self.real.snapshot()


def test_an_interrupt_or_a_bug_in_tracking_is_journaled_and_never_misattributed(tmp_path, khaelor_home):
    root = tmp_path / "work"
    root.mkdir()
    live = Live(root, khaelor_home)
    flaky = Flaky(FileSnapshots(root, tmp_path / "snap", []))
    history = ChangeHistory()
    live.session.journal.listeners.append(history.apply)
    live.tracker = Tracker(live.session, flaky, history)
    live.tracker.start()
    flaky.fault = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        live.call(lambda: write(root, "lost.txt", "never attributed\n"))
    assert history.open_calls == {} and history.reference is None
    flaky.fault = ValueError("a bug")
    live.call(lambda: write(root, "f.txt", "also lost\n"))
    flaky.fault = None
    live.call(lambda: write(root, "f.txt", "seen\n"))
    gaps = [r["reason"] for r in read_log(live.log).records if r["type"] == "attribution_gap"]
    assert gaps == ["interrupted (KeyboardInterrupt) while taking a snapshot",
                    "internal error in change tracking: ValueError: a bug",
                    "internal error in change tracking: ValueError: a bug"]
    out = live.diff()
    assert summary(out) == {"f.txt": "M"} and "+seen" in out and "lost.txt" not in out
    assert "changes around 2 tool call(s) could not be tracked" in out
    live.session.journal.close()


def test_colour_only_on_a_terminal_and_never_with_no_color(fake_api, workspace, khaelor_home):
    fake_api.script(reply(tool_use("bash", {"command": "echo hi > f.txt"})), reply(text("ok")))
    assert run_khaelor(["-p", "go", "--permission-mode", "bypass"], workspace, fake_api).returncode == 0

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert "\x1b[32m+hi\x1b[0m" in sessions_diff(khaelor_home, workspace, stdout=Terminal())
    assert "\x1b[" not in sessions_diff(khaelor_home, workspace, stdout=Terminal(), environ={"NO_COLOR": "1"})
    assert "\x1b[" not in sessions_diff(khaelor_home, workspace)


def test_a_session_without_change_records_says_so(workspace, khaelor_home):
    store = Store(khaelor_home / "sessions", khaelor_home)
    log = store.new_log_path(workspace, "20250101T000000-000-aaaaaa")
    Session.create(log, {"session_id": log.stem, "workspace": str(workspace)}, time.time).journal.close()
    out = sessions_diff(khaelor_home, workspace)
    assert out == ("no change record in this session: tracking never started "
                   "(the session began before change tracking)\n")


@pytest.mark.parametrize("facts, words", [
    ({"backend": "git", "head": "a" * 40, "branch": "main"}, "git aaaaaaaaaaaa on main"),
    ({"backend": "git", "head": "a" * 40, "branch": None}, "git aaaaaaaaaaaa (detached HEAD)"),
    ({"backend": "git", "head": None, "branch": "main"}, "git, no commits yet on main"),
    ({"backend": "files", "reason": "git is not installed"}, "no git (git is not installed); tracked by content"),
])
def test_the_baseline_is_described_in_a_few_words(facts, words):
    assert describe_baseline(facts) == words


def test_diff_before_any_session_and_bad_arguments(workspace, khaelor_home):
    assert session_lines(None, "") == [("no session yet: the agent has not changed anything", "dim")]
    done = run_khaelor(["sessions", "diff"], workspace)
    assert done.returncode == 2 and "the following arguments are required: ID" in done.stderr
    done = run_khaelor(["sessions", "diff", "1999"], workspace)
    assert done.returncode == 2 and "no session matches '1999'" in done.stderr and "Traceback" not in done.stderr
