"""Session artifacts: measuring, purging with the session, orphans, the total cap — the module and the CLI."""

import ctypes
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from khaelor import artifacts, goal
from khaelor.journal import Journal
from khaelor.store import Store
from tests.conftest import khaelor_env, run_khaelor
from tests.fakeapi import reply, text

A, B, C, D = (f"2026010{n}T000000-000-00000{n}" for n in (1, 2, 3, 4))
DAY = 24 * 3600


def put(home: Path, session_id: str, kind: str = "tool-output", name: str = "out.log", size: int = 1000) -> Path:
    """One artifact file of `size` bytes, in owner-private folders as the tools make them."""
    path = home / kind / session_id / name
    path.parent.mkdir(parents=True, exist_ok=True)
    for folder in path.relative_to(home).parents[:-1]:
        os.chmod(home / folder, 0o700)
    path.write_bytes(b"x" * size)
    os.chmod(path, 0o600)
    return path


def age(home: Path, session_id: str, seconds_ago: float) -> None:
    """Make every artifact of the session last written `seconds_ago`."""
    moment = time.time() - seconds_ago
    for folder in artifacts.folders_of(home, session_id):
        for path in [*folder.rglob("*"), folder] if folder.is_dir() else []:
            os.utime(path, (moment, moment), follow_symlinks=False)


def make_log(store: Store, workspace: Path, session_id: str) -> Path:
    journal = Journal.create(store.new_log_path(workspace, session_id), {"session_id": session_id}, time.time)
    journal.close()
    return journal.path


def existing(home: Path, session_id: str) -> list[str]:
    return [folder.parent.name for folder in artifacts.folders_of(home, session_id) if os.path.lexists(folder)]


# --- the module -----------------------------------------------------------------------------------------------------

def test_survey_counts_each_sessions_files_and_follows_no_symlink(khaelor_home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"y" * 100_000)
    put(khaelor_home, A, size=1000)
    put(khaelor_home, A, "process-logs", "p1.log", 200)
    put(khaelor_home, A, "snapshots", "index", 30)
    (khaelor_home / "tool-output" / A / "into-outside").symlink_to(outside)
    (khaelor_home / "tool-output" / A / "to-big").symlink_to(outside / "big")
    (khaelor_home / "process-logs" / B).symlink_to(outside)
    put(khaelor_home, "not-a-session", size=5000)
    found = artifacts.survey(khaelor_home)
    assert set(found.sessions) == {A, B}
    assert found.sessions[A].size == 1230 and found.sessions[B].size == 0
    assert found.total == 1230 and found.problems == []


def test_the_walk_is_bounded(khaelor_home):
    for n in range(5):
        put(khaelor_home, A, name=f"f{n}")
    found = artifacts.survey(khaelor_home, limit=3)
    assert found.sessions[A].size == 3000
    assert found.problems == ["stopped counting at the entry limit: sizes are lower bounds"]


def test_removing_a_session_takes_exactly_its_folders(khaelor_home, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not ours")
    for session_id in (A, B):
        for kind in artifacts.KINDS:
            put(khaelor_home, session_id, kind)
    (khaelor_home / "snapshots" / A / "link").symlink_to(outside)
    (khaelor_home / "process-logs" / A).rename(khaelor_home / "moved")
    (khaelor_home / "process-logs" / A).symlink_to(outside)
    freed = artifacts.remove_session(khaelor_home, A)
    assert freed.sessions == [A] and freed.size == 2000 and freed.problems == []
    assert existing(khaelor_home, A) == [] and existing(khaelor_home, B) == list(artifacts.KINDS)
    assert (outside / "keep.txt").read_text() == "not ours" and (khaelor_home / "moved" / "out.log").exists()
    with pytest.raises(ValueError):
        artifacts.remove_session(khaelor_home, "../sessions")


def test_the_cap_goes_least_recently_written_first_and_never_takes_the_kept_one(khaelor_home):
    for session_id, days in ((A, 1), (B, 4), (C, 3), (D, 2)):
        put(khaelor_home, session_id, size=1000)
        age(khaelor_home, session_id, days * DAY)
    freed, left = artifacts.enforce_cap(khaelor_home, 2000, keep={B}, busy=lambda session_id: False)
    assert freed.sessions == [C, D] and freed.size == 2000 and left == 2000
    assert set(artifacts.survey(khaelor_home).sessions) == {A, B}


def test_the_cap_skips_busy_sessions_and_says_when_it_cannot_get_under(khaelor_home):
    for session_id in (A, B):
        put(khaelor_home, session_id)
    freed, left = artifacts.enforce_cap(khaelor_home, 10, keep={A}, busy=lambda session_id: session_id == B)
    assert freed.sessions == [] and left == 2000
    assert freed.problems == ["still 2,000 bytes, over the cap of 10 bytes: what is left belongs to sessions "
                              "in use or could not be removed"]


def test_orphans_have_no_log_live_or_trashed(khaelor_home, tmp_path):
    store = Store(khaelor_home / "sessions", khaelor_home)
    make_log(store, tmp_path, A)
    store.trash(make_log(store, tmp_path, B))
    for session_id in (A, B, C):
        put(khaelor_home, session_id)
    assert store.known_ids() == {A, B}
    assert artifacts.orphans(artifacts.survey(khaelor_home), store.known_ids()) == [C]


def test_purge_deletes_the_trashed_log_sidecar_goal_and_artifacts_and_nothing_else(khaelor_home, tmp_path):
    store = Store(khaelor_home / "sessions", khaelor_home)
    logs = {session_id: make_log(store, tmp_path, session_id) for session_id in (A, B)}
    for session_id, log in logs.items():
        goal.save(log, goal.Goal("ship it"))
        (log.parent / ".metadata").mkdir(exist_ok=True)
        (log.parent / ".metadata" / f"{session_id}.json").write_text('{"name": "x", "tags": []}')
        for kind in artifacts.KINDS:
            put(khaelor_home, session_id, kind)
    trashed = store.trash(logs[A])
    freed = store.purge(trashed)
    assert freed.sessions == [A] and freed.problems == [] and freed.size > 3000
    assert list(trashed.parent.iterdir()) == [] and goal.load(logs[A]) is None and existing(khaelor_home, A) == []
    assert logs[B].exists() and goal.load(logs[B]).objective == "ship it"
    assert existing(khaelor_home, B) == list(artifacts.KINDS)


def test_start_checks_at_most_once_a_day_and_never_raises(khaelor_home):
    store = Store(khaelor_home / "sessions", khaelor_home)
    notices: list[str] = []
    put(khaelor_home, A, size=5000)
    age(khaelor_home, A, DAY)
    put(khaelor_home, B, size=5000)
    now = time.time()
    artifacts.enforce_cap_at_start(store, 6000, B, now, notices.append)
    assert notices == ["removed the artifacts of 1 least recently used session(s) (5,000 bytes) "
                       "to stay under tool_output.cap_total"]
    assert existing(khaelor_home, A) == [] and stat.S_IMODE((khaelor_home / artifacts.STAMP).stat().st_mode) == 0o600
    put(khaelor_home, C, size=5000)
    artifacts.enforce_cap_at_start(store, 6000, B, now + DAY - 1, notices.append)
    assert existing(khaelor_home, C) == ["tool-output"] and len(notices) == 1
    (khaelor_home / artifacts.STAMP).unlink()
    (khaelor_home / artifacts.STAMP).mkdir()
    artifacts.enforce_cap_at_start(store, 6000, B, now + DAY, notices.append)
    assert notices[1].startswith("artifact clean-up skipped: ") and len(notices) == 2


def test_sizes_read_as_bytes_and_binary_units():
    assert artifacts.size_text(999) == "999 bytes"
    assert artifacts.size_text(3 << 20) == "3,145,728 bytes (3.0 MiB)"
    assert artifacts.size_text(1 << 30) == "1,073,741,824 bytes (1.0 GiB)"


# --- the command line -----------------------------------------------------------------------------------------------

def new_session(api, workspace: Path, home: Path) -> Path:
    before = set(home.glob("sessions/*/*.jsonl"))
    api.script(reply(text("done")))
    done = run_khaelor(["-p", "hello"], workspace, api)
    assert done.returncode == 0, done.stderr
    (log,) = set(home.glob("sessions/*/*.jsonl")) - before
    return log


def sessions(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    done = run_khaelor(["sessions", *args], cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def private(home: Path) -> bool:
    paths = [path for kind in artifacts.KINDS for path in (home / kind).rglob("*")] + [home / artifacts.STAMP]
    return all(stat.S_IMODE(path.lstat().st_mode) == (0o700 if path.is_dir() else 0o600) for path in paths)


def test_purge_deletes_a_trashed_session_for_good(fake_api, workspace, khaelor_home):
    gone, kept = new_session(fake_api, workspace, khaelor_home), new_session(fake_api, workspace, khaelor_home)
    for log in (gone, kept):
        put(khaelor_home, log.stem, size=4096)
        assert sessions(["rename", log.stem, "named"], workspace).returncode == 0
    sessions(["delete", gone.stem], workspace)
    done = sessions(["purge", gone.stem[:22]], workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{gone.stem} deleted for good: freed ")
    assert not any(gone.parent.rglob(f"{gone.stem}*")) and existing(khaelor_home, gone.stem) == []
    assert kept.exists() and (kept.parent / ".metadata" / f"{kept.stem}.json").exists()
    assert existing(khaelor_home, kept.stem) == ["tool-output", "snapshots"]
    assert "no trashed session matches" in sessions(["restore", gone.stem], workspace).stderr


def test_purge_refuses_what_is_not_in_the_trash(fake_api, workspace, khaelor_home):
    live = new_session(fake_api, workspace, khaelor_home)
    done = sessions(["purge", live.stem], workspace)
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"khaelor: error: {live.stem} is not in the trash; purge deletes only trashed sessions",
        f"khaelor: hint: khaelor sessions delete {live.stem} moves it to the trash first"]
    done = sessions(["purge", "1999"], workspace)
    assert done.returncode == 2 and done.stderr.splitlines()[0] == "khaelor: error: no trashed session matches '1999'"
    assert live.exists() and existing(khaelor_home, live.stem) == ["snapshots"]


def test_empty_trash_is_per_workspace_unless_all_workspaces(fake_api, workspace, khaelor_home, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    here, there = new_session(fake_api, workspace, khaelor_home), new_session(fake_api, other, khaelor_home)
    sessions(["delete", here.stem], workspace)
    sessions(["delete", there.stem], other)
    done = sessions(["empty-trash"], workspace)
    assert done.returncode == 0 and done.stdout.startswith("deleted 1 trashed session(s) for good: freed ")
    assert existing(khaelor_home, here.stem) == [] and existing(khaelor_home, there.stem) == ["snapshots"]
    assert sessions(["empty-trash"], workspace).stdout == (
        "the trash is empty in this workspace (--all-workspaces empties every one)\n")
    done = sessions(["empty-trash", "--all-workspaces"], workspace)
    assert done.stdout.startswith("deleted 1 trashed session(s) for good") and not any(khaelor_home.rglob("*/.trash/*"))
    assert existing(khaelor_home, there.stem) == []


def test_gc_removes_orphans_then_the_least_recently_used_beyond_the_cap(fake_api, workspace, khaelor_home):
    old, new = new_session(fake_api, workspace, khaelor_home), new_session(fake_api, workspace, khaelor_home)
    put(khaelor_home, A, "process-logs", size=777)
    put(khaelor_home, old.stem, size=9000)
    put(khaelor_home, new.stem, size=9000)
    age(khaelor_home, old.stem, DAY)
    (khaelor_home / "config.yaml").write_text("tool_output:\n  cap_total: 12000\n")
    done = sessions(["gc"], workspace)
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    assert first == "orphans: removed the artifacts of 1 session(s) with no log, live or trashed: freed 777 bytes"
    assert second.startswith("cap: removed the artifacts of 1 least recently used session(s): freed ")
    assert second.endswith(" left; tool_output.cap_total is 12,000 bytes")
    assert existing(khaelor_home, A) == existing(khaelor_home, old.stem) == []
    assert existing(khaelor_home, new.stem) == ["tool-output", "snapshots"] and old.exists()
    assert private(khaelor_home)


def test_gc_never_takes_a_session_in_use(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home)
    put(khaelor_home, log.stem, size=5000)
    (khaelor_home / "config.yaml").write_text("tool_output:\n  cap_total: 10\n")
    journal, _ = Journal.open(log, time.time)
    try:
        done = sessions(["gc"], workspace)
    finally:
        journal.close()
    assert done.returncode == 1 and "cap: removed the artifacts of 0 " in done.stdout
    assert done.stderr.startswith("khaelor: warning: still ") and "belongs to sessions in use" in done.stderr
    assert existing(khaelor_home, log.stem) == ["tool-output", "snapshots"]


def test_a_session_start_enforces_the_cap_once_a_day_keeping_itself(fake_api, workspace, khaelor_home):
    old = new_session(fake_api, workspace, khaelor_home)
    put(khaelor_home, old.stem, size=50_000)
    age(khaelor_home, old.stem, DAY)
    (khaelor_home / "config.yaml").write_text("tool_output:\n  cap_total: 40000\n")
    (khaelor_home / artifacts.STAMP).write_text(f"{time.time() - DAY - 1}\n")
    fake_api.script(reply(text("done")))
    done = run_khaelor(["-p", "hello"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    (notice,) = done.stderr.splitlines()
    assert notice.startswith("removed the artifacts of 1 least recently used session(s) (")
    assert notice.endswith(" to stay under tool_output.cap_total")
    assert existing(khaelor_home, old.stem) == []
    assert old.exists() and len(artifacts.survey(khaelor_home).sessions) == 1 and private(khaelor_home)
    put(khaelor_home, old.stem, size=50_000)
    age(khaelor_home, old.stem, DAY)
    fake_api.script(reply(text("done")))
    done = run_khaelor(["-p", "hello"], workspace, fake_api)
    assert done.returncode == 0 and done.stderr == "" and existing(khaelor_home, old.stem) == ["tool-output"]


def without_dac_override() -> None:
    """In the child only: as root, give up reading what the permission bits forbid (CAP_DAC_*), so 000 means 000."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "cannot drop CAP_DAC_OVERRIDE")


def run_unprivileged(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "khaelor", *args], cwd=cwd, env=khaelor_env(), text=True,
                              capture_output=True, timeout=60, preexec_fn=without_dac_override)
    except subprocess.SubprocessError as exc:
        pytest.skip(f"cannot drop root's permission override here: {exc}")


def test_an_unreadable_artifact_folder_is_a_clear_message(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home)
    locked = put(khaelor_home, log.stem, size=100).parent
    put(khaelor_home, A, size=100)
    os.chmod(locked, 0)
    try:
        gc = run_unprivileged(["sessions", "gc"], workspace)
        doctor = run_unprivileged(["doctor"], workspace)
    finally:
        os.chmod(locked, 0o700)
    assert gc.returncode == 1 and "Traceback" not in gc.stderr
    assert gc.stderr == f"khaelor: warning: cannot read {locked}: Permission denied\n"
    assert gc.stdout.startswith("orphans: removed the artifacts of 1 session(s)")
    (line,) = [line for line in doctor.stdout.splitlines() if line.split()[1] == "artifacts"]
    assert line.startswith("warn") and f"cannot read {locked}: Permission denied" in line and "fix: chmod" in line


def test_a_purge_that_cannot_remove_everything_says_so_and_gc_finishes_it(fake_api, workspace, khaelor_home):
    log = new_session(fake_api, workspace, khaelor_home)
    locked = put(khaelor_home, log.stem, name="deep/out.log", size=100).parent
    sessions(["delete", log.stem], workspace)
    os.chmod(locked, 0)
    try:
        done = run_unprivileged(["sessions", "purge", log.stem], workspace)
    finally:
        os.chmod(locked, 0o700)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stdout.startswith(f"{log.stem} deleted for good: freed ")
    assert done.stderr.startswith(f"khaelor: warning: could not remove {locked}") and "Permission denied" in done.stderr
    assert not (log.parent / ".trash" / log.name).exists() and existing(khaelor_home, log.stem) == ["tool-output"]
    done = sessions(["gc"], workspace)
    assert done.returncode == 0 and done.stdout.startswith("orphans: removed the artifacts of 1 session(s)")
    assert existing(khaelor_home, log.stem) == []
