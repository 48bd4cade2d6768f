"""Sharing a session as an unlisted gist through the person's own GitHub CLI (SPEC §12).

Two steps, so that a person reviews exactly what leaves the machine:
`prepare_share` writes a bounded, redacted snapshot of the whole session (all
branches, as a `khaelor-session-export` JSON document) to an owner-private
preview file and returns its path and SHA-256; `publish_share` sends those
very bytes — re-read and checked against the previewed hash — to
`gh gist create` (never `--public`) and returns the gist's URL.

Invariants: nothing is published without a separate, explicit approval
(the caller's business: the default answer is cancel); a preview that changed
since it was shown is refused; KHAELOR never handles GitHub credentials —
`gh` does, and a missing or logged-out `gh` is a clear error. An unlisted
gist is not private, and the preview says so.
"""

import hashlib
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from khaelor.errors import KhaelorError
from khaelor.export import snapshot, write_private
from khaelor.journal import private_dir, timestamp
from khaelor.redact import Redactions

MAX_SHARE_BYTES = 10 << 20
GH_TIMEOUT = 120
UNLISTED = "An unlisted gist is not private: anyone with the link can read, copy and pass it on."


class ShareError(KhaelorError):
    """The snapshot cannot be prepared or published."""


@dataclass
class SharePreview:
    """A snapshot written locally for review, not yet published."""

    session_id: str
    path: Path
    sha256: str
    size: int
    redactions: Redactions

    def lines(self) -> list[str]:
        """What to show before asking: where to look, the hash, what redaction did, and the warning."""
        return [f"snapshot of session {self.session_id} (all branches, {self.size:,} bytes) for review:",
                f"  {self.path}", f"  sha256 {self.sha256}", f"  {self.redactions.summary()}",
                "Redaction is a safety filter, not proof: read the file before publishing.", UNLISTED]


@dataclass
class ShareResult:
    """A published snapshot."""

    url: str
    preview: SharePreview

    def lines(self) -> list[str]:
        return [f"published {self.preview.path.name} (sha256 {self.preview.sha256[:16]}…) as an unlisted gist:",
                self.url, UNLISTED]


def prepare_share(log: Path, data_root: Path, clock: Callable[[], float] = time.time) -> SharePreview:
    """Write the redacted snapshot of the session at `log` under `<data_root>/share/` and describe it."""
    taken = snapshot(log, "json", clock=clock)
    if len(taken.data) > MAX_SHARE_BYTES:
        raise ShareError(f"the snapshot is {len(taken.data):,} bytes, over the {MAX_SHARE_BYTES:,} byte share limit",
                         hint="export it and hand the file over another way")
    stamp = timestamp(clock).replace(":", "").replace("-", "").replace(".", "")
    path = private_dir(Path(data_root) / "share") / f"{taken.session_id}-{stamp}.khaelor-session.json"
    write_private(path, taken.data, force=False)
    return SharePreview(taken.session_id, path, taken.sha256, len(taken.data), taken.redactions)


def publish_share(preview: SharePreview, environ: dict[str, str]) -> ShareResult:
    """Publish the previewed bytes as an unlisted gist with `gh`; returns its URL."""
    data = _previewed_bytes(preview)
    gh = shutil.which("gh", path=environ.get("PATH"))
    if gh is None:
        raise ShareError("the GitHub CLI (gh) is not on PATH", hint="install gh, then run: gh auth login")
    status = _run([gh, "auth", "status"], b"", environ)
    if status.returncode != 0:
        raise ShareError("gh is not logged in to GitHub", hint="run: gh auth login")
    created = _run([gh, "gist", "create", "--filename", preview.path.name,
                    "--desc", f"KHAELOR session {preview.session_id} (redacted snapshot)", "-"], data, environ)
    if created.returncode != 0:
        raise ShareError(f"gh gist create failed (exit {created.returncode}): {_first_line(created.stderr)}")
    urls = [line for line in created.stdout.decode("utf-8", "replace").split() if line.startswith("https://")]
    if not urls:
        raise ShareError(f"gh gist create printed no URL: {_first_line(created.stdout)}")
    return ShareResult(urls[-1], preview)


def _previewed_bytes(preview: SharePreview) -> bytes:
    try:
        data = preview.path.read_bytes()
    except OSError as exc:
        raise ShareError(f"cannot read the preview {preview.path}: {exc.strerror}") from None
    if hashlib.sha256(data).hexdigest() != preview.sha256:
        raise ShareError(f"the preview {preview.path} changed after it was shown; nothing was published",
                         hint="prepare the share again and review the new file")
    return data


def _run(command: list[str], data: bytes, environ: dict[str, str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, input=data, capture_output=True, env=environ, timeout=GH_TIMEOUT,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        raise ShareError(f"gh did not finish within {GH_TIMEOUT} s; nothing is known to be published") from None
    except OSError as exc:
        raise ShareError(f"cannot run gh: {exc.strerror}") from None


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0][:200] if text else "no message"
