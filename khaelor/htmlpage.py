"""One self-contained, script-free HTML page of a session (SPEC §12).

Everything in a session may be hostile (tool output, fetched pages, model
text steered by a prompt injection), so the page is built to stay inert:

* no script at all, and a Content-Security-Policy `<meta>` as the first thing
  in `<head>`: `default-src 'none'`, the one inline stylesheet pinned by its
  SHA-256, `img-src 'none'`, `base-uri 'none'`, `form-action 'none'`;
* Markdown (message text only) through markdown-it with raw HTML off: author
  HTML is shown as text; links are rendered as text followed by their real
  destination, never as `<a href>`; images become a text placeholder, so no
  remote media is ever fetched;
* every interpolated value is HTML-escaped; the only links are in-page
  (`#e-<entry id>`) ones between entries of the branch structure;
* terminal control, bidi and invisible characters are shown as visible
  pictures (`␛`, `⟨U+202E⟩`), never passed through;
* bounded work: Markdown only for message text under a size cap, Pygments
  highlighting only for short fenced blocks with a known language and within
  a per-page budget; everything else is plain escaped `<pre>`.
"""

import base64
import hashlib
import html
import json
import re

from khaelor.redact import Redactions
from khaelor.session import SessionState

MARKDOWN_MAX = 32_000
MARKDOWN_MAX_BRACKETS = 400
HIGHLIGHT_MAX = 20_000
HIGHLIGHT_BUDGET = 1_000_000
FIELD_MAX = 200_000
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2069\ufeff"
                      "\U000e0000-\U000e007f\ud800-\udfff]")
_PAGE_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #1d1d1f; }
header dl { display: grid; grid-template-columns: max-content 1fr; gap: 0 1rem; font-size: 13px; }
dt { color: #666; }
nav li.active { font-weight: bold; }
article { border-left: 3px solid #ddd; margin: 1rem 0; padding: 0 0 0 1rem; }
article.assistant { border-color: #7a5af8; }
article.user { border-color: #2e90fa; }
article.tool_results { border-color: #aaa; }
.who { font-size: 12px; color: #666; }
pre { background: #f6f6f6; padding: .5rem; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
details { margin: .5rem 0; }
summary { cursor: pointer; font-family: monospace; }
.error summary { color: #b42318; }
.url, .image { color: #666; font-family: monospace; }
.fork { font-size: 13px; }
"""


def render_html(records: list[dict], state: SessionState, info: dict, redactions: Redactions | None) -> bytes:
    """The page for a session: its metadata, branch index and every entry of every branch."""
    page = _Page(records, state)
    style = _style()
    digest = base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii")
    policy = (f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; base-uri 'none'; "
              "form-action 'none'")
    title = _text(info.get("title") or "untitled")
    body = page.header(info, redactions) + page.branches()
    document = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
                f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
                f'<meta name="referrer" content="no-referrer">\n<title>{title} · khaelor</title>\n'
                f"<style>{style}</style>\n</head><body>\n{body}</body></html>\n")
    return document.encode("utf-8", "replace")


def _style() -> str:
    from pygments.formatters import HtmlFormatter

    return _PAGE_STYLE + HtmlFormatter().get_style_defs(".hl")


def visible(text: str) -> str:
    """`text` with control, bidi and invisible characters replaced by visible stand-ins (tab and newline kept)."""
    return _CONTROL.sub(_stand_in, text)


def _stand_in(match: re.Match) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)
    return "␡" if code == 0x7F else f"⟨U+{code:04X}⟩"


def _text(value) -> str:
    """Any value as escaped, visible text."""
    return html.escape(visible(str(value)), quote=True)


def _bounded(text: str) -> str:
    if len(text) <= FIELD_MAX:
        return text
    return text[:FIELD_MAX] + f"\n[… {len(text) - FIELD_MAX:,} more characters are in the JSON export]"


def _pre(text: str) -> str:
    return f"<pre>{_text(_bounded(text))}</pre>"


def _anchor(entry_id) -> str:
    return "e-" + re.sub(r"[^A-Za-z0-9_-]", "_", str(entry_id))


class _Page:
    """The entry graph of one session and the per-page rendering state."""

    def __init__(self, records: list[dict], state: SessionState):
        self.state = state
        self.children: dict[str | None, list[str]] = {}
        for entry_id, entry in state.entries.items():
            self.children.setdefault(entry.get("parent"), []).append(entry_id)
        self.calls = _calls(records)
        self.markdown = _Markdown()

    def header(self, info: dict, redactions: Redactions | None) -> str:
        usage = self.state.usage_totals()
        facts = [("session", self.state.header.get("session_id")), ("name", info.get("name")),
                 ("tags", ", ".join(info.get("tags") or [])), ("created", info.get("created")),
                 ("updated", info.get("updated")), ("model", info.get("model")), ("workspace", info.get("workspace")),
                 ("entries", info.get("entries")), ("tokens", ", ".join(f"{k} {v:,}" for k, v in usage.items())),
                 ("redaction", redactions.summary() if redactions is not None else "off: raw values (--include-secrets)")]
        rows = "".join(f"<dt>{_text(k)}</dt><dd>{_text(v)}</dd>" for k, v in facts if v not in (None, ""))
        return f"<header><h1>{_text(info.get('title') or 'untitled')}</h1><dl>{rows}</dl></header>\n"

    def threads(self) -> list[tuple[str | None, list[str]]]:
        """Branches as (fork parent, entry ids): the selected branch first, then every side branch."""
        entries = self.state.entries
        active = [entry["id"] for entry in self.state.branch()]
        threads = [(None, active)] if active else []
        placed = set(active)
        pending = [child for entry_id in active for child in self.children.get(entry_id, [])]
        pending += [entry_id for entry_id, entry in entries.items() if entry.get("parent") not in entries]
        while pending:
            start = pending.pop(0)
            if start in placed:
                continue
            chain = self._follow(start, placed)
            threads.append((entries[start].get("parent"), chain))
            pending += [child for entry_id in chain for child in self.children.get(entry_id, [])]
        return threads

    def _follow(self, start: str, placed: set[str]) -> list[str]:
        """From `start` down through the newest child not yet placed; marks the chain placed."""
        chain = [start]
        placed.add(start)
        while True:
            free = [child for child in self.children.get(chain[-1], []) if child not in placed]
            if not free:
                return chain
            chain.append(free[-1])
            placed.add(free[-1])

    def branches(self) -> str:
        threads = self.threads()
        items = []
        for number, (parent, chain) in enumerate(threads):
            label = "selected branch" if number == 0 else f"branch {number}"
            origin = f" from <a href=\"#{_anchor(parent)}\">{_text(parent)}</a>" if parent else ""
            items.append(f'<li{" class=active" if number == 0 else ""}><a href="#b-{number}">{label}</a>{origin}'
                         f" · {len(chain)} entries, ends at <a href=\"#{_anchor(chain[-1])}\">{_text(chain[-1])}</a></li>")
        nav = f"<nav><h2>Branches</h2><ul>{''.join(items)}</ul></nav>\n"
        sections = [self._section(number, parent, chain) for number, (parent, chain) in enumerate(threads)]
        return nav + "".join(sections)

    def _section(self, number: int, parent: str | None, chain: list[str]) -> str:
        heading = "Selected branch" if number == 0 else f"Branch {number}"
        origin = f' (forks from <a href="#{_anchor(parent)}">{_text(parent)}</a>)' if parent else ""
        entries = "".join(self._entry(self.state.entries[entry_id]) for entry_id in chain)
        return f'<section id="b-{number}"><h2>{heading}{origin}</h2>\n{entries}</section>\n'

    def _entry(self, entry: dict) -> str:
        kind = str(entry.get("kind") or "entry")
        css = re.sub(r"[^a-z_]", "", kind)
        head = f'<p class="who">{_text(kind)} · {_text(entry.get("ts", ""))} · {_text(entry.get("id"))}</p>'
        forks = self.children.get(entry["id"], [])
        fork = ""
        if len(forks) > 1:
            links = ", ".join(f'<a href="#{_anchor(child)}">{_text(child)}</a>' for child in forks)
            fork = f'<p class="fork">branches here: {links}</p>'
        message = entry.get("message")
        body = self._message(message) if isinstance(message, dict) else self._fields(entry)
        return f'<article class="{css}" id="{_anchor(entry["id"])}">{head}{body}{fork}</article>\n'

    def _fields(self, entry: dict) -> str:
        rest = {k: v for k, v in entry.items() if k not in ("type", "v", "ts", "id", "parent", "kind", "message")}
        return _pre(json.dumps(rest, ensure_ascii=False, indent=1)) if rest else ""

    def _message(self, message: dict) -> str:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        return "".join(self._block(block) for block in content or [] if isinstance(block, dict))

    def _block(self, block: dict) -> str:
        kind = block.get("type")
        if kind == "text":
            return self.markdown.render(str(block.get("text", "")))
        if kind == "thinking":
            return f"<details><summary>thinking</summary>{_pre(str(block.get('thinking', '')))}</details>"
        if kind == "redacted_thinking":
            return "<p class=\"who\">[redacted thinking]</p>"
        if kind == "tool_use":
            return self._tool_use(block)
        if kind == "tool_result":
            return self._tool_result(block)
        if kind == "image":
            media = (block.get("source") or {}).get("media_type", "image")
            return f'<p class="image">[image: {_text(media)} — not shown]</p>'
        return _pre(json.dumps(block, ensure_ascii=False, indent=1))

    def _tool_use(self, block: dict) -> str:
        arguments = block.get("input")
        brief = arguments.get("command") if isinstance(arguments, dict) and "command" in arguments else json.dumps(
            arguments, ensure_ascii=False)
        brief = str(brief).replace("\n", " ")
        decision = self.calls.get(block.get("id"), {})
        verdict = f"<p class=\"who\">permission: {_text(decision.get('decision'))} — {_text(decision.get('reason'))}</p>" \
            if decision else ""
        return (f"<details><summary>● {_text(block.get('name'))} {_text(brief[:120])}</summary>"
                f"{_pre(json.dumps(arguments, ensure_ascii=False, indent=1))}{verdict}</details>")

    def _tool_result(self, block: dict) -> str:
        content = block.get("content")
        if isinstance(content, list):
            content = "\n".join(str(b.get("text", f"[{b.get('type')} block]")) for b in content if isinstance(b, dict))
        text = str(content or "")
        failed = bool(block.get("is_error"))
        lines = text.count("\n") + 1 if text else 0
        return (f'<details class="{"error" if failed else "result"}"><summary>{"✗" if failed else "✓"} result · '
                f"{lines} line{'s' if lines != 1 else ''}</summary>{_pre(text)}</details>")


def _calls(records: list[dict]) -> dict[str, dict]:
    """The permission decision of each tool call, by call id."""
    return {r.get("call_id"): r for r in records if r.get("type") == "permission" and isinstance(r.get("call_id"), str)}


class _Markdown:
    """markdown-it with raw HTML off, inert links and images, and bounded highlighting."""

    def __init__(self):
        from markdown_it import MarkdownIt

        self.md = MarkdownIt("js-default", {"maxNesting": 20})
        self.md.add_render_rule("link_open", _link_open)
        self.md.add_render_rule("link_close", _link_close)
        self.md.add_render_rule("image", _image)
        self.md.add_render_rule("fence", lambda renderer, tokens, index, options, env: self.fence(tokens[index]))
        self.md.add_render_rule("code_block", lambda renderer, tokens, index, options, env: self.fence(tokens[index]))
        self.budget = HIGHLIGHT_BUDGET

    def render(self, text: str) -> str:
        text = visible(text)
        if len(text) > MARKDOWN_MAX or text.count("[") > MARKDOWN_MAX_BRACKETS:
            return _pre(text)
        return self.md.render(text, {"links": []})

    def fence(self, token) -> str:
        """A fenced or indented code block: highlighted when short and its language is known, else plain."""
        language = token.info.strip().split(" ")[0] if token.info else ""
        code = token.content
        highlighted = self._highlight(code, language)
        return highlighted or f"<pre><code>{html.escape(code)}</code></pre>\n"

    def _highlight(self, code: str, language: str) -> str | None:
        if not _LANGUAGE.fullmatch(language) or len(code) > HIGHLIGHT_MAX or len(code) > self.budget:
            return None
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
        from pygments.util import ClassNotFound

        try:
            lexer = get_lexer_by_name(language)
        except ClassNotFound:
            return None
        self.budget -= len(code)
        return f'<pre class="hl"><code>{highlight(code, lexer, HtmlFormatter(nowrap=True))}</code></pre>\n'


def _link_open(self, tokens, index, options, env) -> str:
    env["links"].append(tokens[index].attrGet("href") or "")
    return '<span class="link">'


def _link_close(self, tokens, index, options, env) -> str:
    target = env["links"].pop() if env["links"] else ""
    return f'</span> <span class="url">⟨{html.escape(str(target))}⟩</span>'


def _image(self, tokens, index, options, env) -> str:
    token = tokens[index]
    alt = "".join(child.content for child in token.children or [])
    return f'<span class="image">[image: {html.escape(alt)} → {html.escape(str(token.attrGet("src") or ""))}]</span>'
