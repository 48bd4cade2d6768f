"""The HTML export opened in a real headless Chromium: hostile content runs nothing and fetches nothing.

A session is written whose messages and tool outputs carry script tags, event
handlers, `javascript:` links, SVG and MathML payloads, meta refresh, iframes,
remote images and stylesheets, all pointing at a local HTTP server that must
receive no request. The page Chromium leaves behind (`--dump-dom`) must hold
no active element, no handler attribute and no live link, while the Markdown
and the highlighted code are still rendered; any payload that ran would
write PWNED into the page. Skipped, with the reason, when no Chromium is
installed; static checks of the page run everywhere.
"""

import html.parser
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from khaelor.export import export_session
from khaelor.journal import Journal

ACTIVE_TAGS = {"script", "iframe", "object", "embed", "svg", "math", "form", "img", "video", "audio", "link", "base",
               "frame", "frameset", "input", "button", "textarea", "a"}


class _Recorder(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.hits.append(self.path)
        self.send_response(200)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def beacon():
    """A local server that records every request it gets; the page must send none."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.hits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def payloads(origin: str) -> tuple[str, str]:
    """(message Markdown, tool output) full of active content aimed at `origin`."""
    message = f"""# Heading stays

Some **bold** text and `inline code`.

<script>document.body.append('PWN'+'ED'); fetch("{origin}/script")</script>
<img src="{origin}/img.png" onerror="document.body.append('PWN'+'ED')">
<svg onload="document.body.append('PWN'+'ED')"><image href="{origin}/svg.png"/></svg>
<math href="javascript:alert(1)"><mtext>x</mtext></math>
<iframe src="{origin}/frame" srcdoc="<script>parent.document.body.append('PWN'+'ED')</script>"></iframe>
<meta http-equiv="refresh" content="0;url={origin}/refresh">
<link rel="stylesheet" href="{origin}/style.css"><style>body {{ background: url({origin}/bg.png) }}</style>
<form action="{origin}/post"><input type=password autofocus onfocus="document.body.append('PWN'+'ED')"></form>
<details open ontoggle="document.body.append('PWN'+'ED')">x</details>

[click me](javascript:document.body.append('PWN'+'ED')) and [site]({origin}/link) and <{origin}/auto>

![remote image]({origin}/markdown.png)

```python
def hello():
    return "highlighted"
```
"""
    tool_output = (f'<script src="{origin}/tool.js"></script><img src=x onerror=alert(1)>'
                   f"\x1b]8;;{origin}/osc8\x1b\\link\x1b]8;;\x1b\\ \x1b]52;c;Y3VybCBldmlsfHNo\x07 \x1b[31mred\x1b[0m"
                   "\u202eevil\u202c\x00\x7f\u0085")
    return message, tool_output


def hostile_session(tmp_path, origin: str):
    message, tool_output = payloads(origin)
    log = tmp_path / "hostile.jsonl"
    title = f'"><script>document.title="PWN"+"ED"</script><img src="{origin}/title.png">'
    journal = Journal.create(log, {"session_id": "20261129T000000-000-abcdef", "workspace": str(tmp_path),
                                   "created": "2026-11-29T00:00:00.000Z", "model": "m", "system": "s"}, time.time)
    journal.append("entry", id="u1", parent=None, kind="user",
                   message={"role": "user", "content": [{"type": "text", "text": title + "\n\n" + message}]})
    journal.append("entry", id="a1", parent="u1", kind="assistant",
                   message={"role": "assistant", "content": [
                       {"type": "text", "text": message},
                       {"type": "tool_use", "id": "toolu_1", "name": '<img src=x onerror="alert(1)">',
                        "input": {"command": tool_output}}]})
    journal.append("entry", id="r1", parent="a1", kind="tool_results", message={"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": tool_output}]})
    journal.append("entry", id="a2", parent="u1", kind="assistant",
                   message={"role": "assistant", "content": [{"type": "text", "text": "an abandoned branch"}]})
    journal.append("head", entry="r1")
    journal.close()
    page = tmp_path / "page.html"
    export_session(log, page, "html")
    return page


class _Elements(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def elements(markup: str) -> list[tuple[str, dict]]:
    parser = _Elements()
    parser.feed(markup)
    return parser.tags


def assert_inert(markup: str) -> None:
    tags = elements(markup)
    body = markup[markup.index("<body"):]
    for tag, attrs in elements(body):
        assert tag not in ACTIVE_TAGS or (tag == "a" and set(attrs) == {"href"} and attrs["href"].startswith("#")), \
            (tag, attrs)
        assert not [name for name in attrs if name.startswith("on") or name in ("style", "src", "srcdoc", "action")]
    metas = [attrs for tag, attrs in tags if tag == "meta"]
    assert [m.get("http-equiv") for m in metas if m.get("http-equiv")] == ["Content-Security-Policy"]


def test_static_page_is_inert_and_keeps_the_structure(tmp_path, beacon):
    origin = f"http://127.0.0.1:{beacon.server_address[1]}"
    markup = hostile_session(tmp_path, origin).read_text()
    assert_inert(markup)
    policy = next(a["content"] for t, a in elements(markup) if t == "meta" and a.get("http-equiv"))
    assert policy.startswith("default-src 'none'; style-src 'sha256-") and "script-src" not in policy
    assert "img-src 'none'" in policy and "base-uri 'none'" in policy and "form-action 'none'" in policy
    assert "\x1b" not in markup and "\u202e" not in markup and "\x00" not in markup and "\x7f" not in markup
    assert "␛]52;c;" in markup and "⟨U+202E⟩" in markup and "␀" in markup
    assert f"⟨{origin}/link⟩" in markup and "[image: remote image → " in markup
    assert 'href="#e-a2"' in markup and 'id="e-a2"' in markup


@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed (.ci/run installs it)")
def test_chromium_runs_no_script_and_fetches_nothing(tmp_path, beacon):
    origin = f"http://127.0.0.1:{beacon.server_address[1]}"
    page = hostile_session(tmp_path, origin)
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=3000", "--dump-dom",
               page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    time.sleep(0.5)
    assert beacon.hits == []
    assert "<h1>Heading stays</h1>" in dom and "<strong>bold</strong>" in dom
    assert '<pre class="hl"><code><span class="k">def</span>' in dom
    assert "PWNED" not in dom
    assert_inert(dom)
