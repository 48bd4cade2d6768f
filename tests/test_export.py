"""`khaelor sessions export`: formats, owner-private output, refusal to overwrite, redaction report, bad logs."""

import json
import os
import stat

import pytest

from khaelor.journal import read_log
from tests.conftest import run_khaelor
from tests.fakeapi import reply, text, tool_use

TOKEN = "ghp_" + "Zq8Lm2" * 6


@pytest.fixture
def session(fake_api, workspace, khaelor_home):
    """A real session made by print mode whose tool output holds a credential."""
    fake_api.script(reply(tool_use("bash", {"command": f"echo {TOKEN}"})), reply(text("Done: **ok**")))
    done = run_khaelor(["-p", "print the token", "--allow", "bash"], workspace, fake_api)
    assert done.returncode == 0, done.stderr
    [log] = khaelor_home.glob("sessions/*/*.jsonl")
    return log


def export(workspace, *args):
    return run_khaelor(["sessions", "export", *args], workspace)


def test_json_export_is_private_redacted_and_leaves_the_source_alone(session, workspace):
    before = (session.read_bytes(), session.stat().st_mtime_ns)
    done = export(workspace, session.stem[:12])
    assert done.returncode == 0, done.stderr
    out = workspace / f"{session.stem}.khaelor-session.json"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "github-token" in done.stdout and "redacted" in done.stdout
    data = out.read_bytes()
    assert TOKEN.encode() not in data and data.isascii()
    document = json.loads(data)
    assert document["format"] == "khaelor-session-export" and document["version"] == 1
    assert document["session_id"] == session.stem and document["redaction"]["by_kind"]["github-token"] >= 1
    assert document["head"] == read_log(session).records[-1].get("entry", document["head"])
    assert [r["type"] for r in document["records"]] == [r["type"] for r in read_log(session).records]
    assert document["metadata"]["title"] == "print the token"
    assert (session.read_bytes(), session.stat().st_mtime_ns) == before


def test_existing_path_is_refused_without_force(session, workspace):
    target = workspace / "out.json"
    target.write_text("keep me")
    done = export(workspace, session.stem, "--output", "out.json")
    assert done.returncode == 1 and target.read_text() == "keep me"
    assert done.stderr.startswith("khaelor: error:") and "already exists" in done.stderr and "--force" in done.stderr
    forced = export(workspace, session.stem, "--output", "out.json", "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(target.read_text())["format"] == "khaelor-session-export"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_jsonl_export_is_the_native_log_redacted(session, workspace):
    done = export(workspace, session.stem, "--output", "copy.jsonl")
    assert done.returncode == 0, done.stderr
    copy = read_log(workspace / "copy.jsonl").records
    original = read_log(session).records
    assert len(copy) == len(original) and copy[0]["session_id"] == original[0]["session_id"]
    assert TOKEN not in (workspace / "copy.jsonl").read_text()


def test_include_secrets_exports_raw_values_with_a_warning(session, workspace):
    done = export(workspace, session.stem, "--include-secrets", "--format", "jsonl", "--output", "raw.jsonl")
    assert done.returncode == 0
    assert "warning" in done.stderr and "--include-secrets" in done.stderr
    assert TOKEN in (workspace / "raw.jsonl").read_text()
    assert "redaction was off" in done.stdout


def test_html_export_by_suffix(session, workspace):
    done = export(workspace, session.stem, "--output", "page.html")
    assert done.returncode == 0, done.stderr
    page = (workspace / "page.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and TOKEN not in page
    assert "<strong>ok</strong>" in page


def test_a_corrupt_log_is_one_line_naming_the_line(session, workspace):
    lines = session.read_bytes().split(b"\n")
    lines[2] = b'{"type": "entry", broken'
    session.write_bytes(b"\n".join(lines))
    done = export(workspace, session.stem)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "line 3" in done.stderr and "Traceback" not in done.stderr


def test_unknown_session_and_bad_format_are_usage_errors(session, workspace):
    assert export(workspace, "1999").returncode == 2
    assert export(workspace, session.stem, "--format", "pdf").returncode == 2


def test_the_source_log_itself_is_never_the_output(session, workspace):
    done = export(workspace, session.stem, "--output", str(session), "--force", "--format", "jsonl")
    assert done.returncode == 1 and "session log itself" in done.stderr
    assert read_log(session).records


def test_export_function_reports_for_the_repl(session, tmp_path):
    from khaelor.export import export_session, format_for_path

    assert format_for_path(tmp_path / "x.jsonl") == "jsonl" and format_for_path(tmp_path / "x") == "html"
    report = export_session(session, tmp_path / "s.html", "html")
    assert report.format == "html" and report.redacted and report.redactions.total >= 1
    assert report.size == os.path.getsize(tmp_path / "s.html") and len(report.sha256) == 64
