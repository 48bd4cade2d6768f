"""`khaelor sessions share`: a reviewed, redacted snapshot published only on approval, through a fake `gh`."""

import hashlib
import json
import stat

import pytest

from tests.conftest import run_khaelor
from tests.fakeapi import reply, text

FAKE_GH = """#!/bin/sh
# A stand-in for the GitHub CLI: records its arguments and standard input, answers like gh.
echo "$@" >> "$GH_RECORD/args"
if [ "$1" = auth ]; then exit "${GH_AUTH_EXIT:-0}"; fi
cat > "$GH_RECORD/stdin"
echo "- Creating gist $4" >&2
echo "https://gist.github.com/someone/0123456789abcdef"
"""


@pytest.fixture
def gh(tmp_path):
    """A fake `gh` on a PATH of its own; returns (environment additions, record folder)."""
    folder, record = tmp_path / "bin", tmp_path / "gh-record"
    folder.mkdir()
    record.mkdir()
    script = folder / "gh"
    script.write_text(FAKE_GH)
    script.chmod(0o755)
    return {"PATH": f"{folder}:/usr/bin:/bin", "GH_RECORD": str(record)}, record


@pytest.fixture
def session_id(fake_api, workspace, khaelor_home):
    fake_api.script(reply(text("The key was " + "sk-ant-api03-" + "Q" * 93 + "AA")))
    assert run_khaelor(["-p", "hello"], workspace, fake_api).returncode == 0
    [log] = khaelor_home.glob("sessions/*/*.jsonl")
    return log.stem


def preview_of(stdout: str):
    lines = stdout.splitlines()
    path = next(line.strip() for line in lines if line.strip().endswith(".khaelor-session.json"))
    digest = next(line.split("sha256 ")[1] for line in lines if "sha256 " in line)
    return path, digest


def test_yes_publishes_exactly_the_previewed_bytes(session_id, workspace, gh):
    extra, record = gh
    done = run_khaelor(["sessions", "share", session_id, "--yes"], workspace, **extra)
    assert done.returncode == 0, done.stderr
    path, digest = preview_of(done.stdout)
    sent = (record / "stdin").read_bytes()
    assert sent == open(path, "rb").read() and hashlib.sha256(sent).hexdigest() == digest
    assert stat.S_IMODE(__import__("os").stat(path).st_mode) == 0o600
    assert b"sk-ant-api03" not in sent and json.loads(sent)["redaction"]["by_kind"] == {"anthropic-key": 1}
    args = (record / "args").read_text().splitlines()
    assert args[0] == "auth status" and args[1].startswith("gist create") and "--public" not in args[1]
    assert "https://gist.github.com/someone/0123456789abcdef" in done.stdout
    assert "unlisted gist is not private" in done.stdout


def test_without_yes_and_without_a_terminal_nothing_is_published(session_id, workspace, gh):
    extra, record = gh
    done = run_khaelor(["sessions", "share", session_id], workspace, **extra)
    assert done.returncode == 1 and "cancelled" in done.stderr
    assert "unlisted gist is not private" in done.stdout and "sha256" in done.stdout
    assert not (record / "args").exists()


def test_missing_or_logged_out_gh_is_a_clear_error(session_id, workspace, gh, tmp_path):
    extra, record = gh
    missing = run_khaelor(["sessions", "share", session_id, "--yes"], workspace, PATH=str(tmp_path / "nowhere"),
                          GH_RECORD=extra["GH_RECORD"])
    assert missing.returncode == 1 and "GitHub CLI (gh) is not on PATH" in missing.stderr
    logged_out = run_khaelor(["sessions", "share", session_id, "--yes"], workspace, GH_AUTH_EXIT="1", **extra)
    assert logged_out.returncode == 1 and "not logged in" in logged_out.stderr and "gh auth login" in logged_out.stderr
    assert not (record / "stdin").exists()


def test_a_preview_changed_after_review_is_refused(session_id, khaelor_home, gh):
    from khaelor.share import ShareError, prepare_share, publish_share

    extra, record = gh
    [log] = khaelor_home.glob(f"sessions/*/{session_id}.jsonl")
    preview = prepare_share(log, khaelor_home)
    preview.path.write_bytes(preview.path.read_bytes() + b" ")
    with pytest.raises(ShareError, match="changed after it was shown"):
        publish_share(preview, extra)
    assert not (record / "args").exists()
