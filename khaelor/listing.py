"""What `khaelor sessions list` and `inspect` show: search, one-line summaries, the inspect report (SPEC §10).

Search runs over a session's id, name, title, tags, workspace, log path and
dates. A query is plain words (each must appear, case-insensitively), any
number of `"quoted phrases"` (each must appear exactly), or `re:REGEX` (a
case-insensitive Python regex; `^` and `$` anchor at each field). Ages are relative to the injected clock;
costs are the ledger's real figures, `n/a` when nothing is priced and
marked `≥` when part is unknown. Text from the log is sanitized before it
is shown.
"""

import datetime
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

from khaelor import cost, metadata
from khaelor.catalog import Summary
from khaelor.errors import UsageError
from khaelor.output import sanitize

PREVIEW_WIDTH = 60


@dataclass(frozen=True)
class Query:
    """A parsed search: words (fuzzy), phrases (exact), or one regex."""

    words: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    pattern: re.Pattern | None = None


def parse_query(text: str) -> Query:
    """Parse the search syntax; UsageError for a bad regex or an unclosed quote."""
    if text.startswith("re:"):
        try:
            return Query(pattern=re.compile(text[3:], re.IGNORECASE | re.MULTILINE))
        except re.error as exc:
            raise UsageError(f"bad regex in --query {text!r}: {exc}") from None
    if text.count('"') % 2:
        raise UsageError(f"unclosed quote in --query {text!r}", hint='quote a phrase like --query \'"fix the bug"\'')
    phrases = tuple(re.findall(r'"([^"]*)"', text))
    rest = re.sub(r'"[^"]*"', " ", text)
    return Query(words=tuple(word.lower() for word in rest.split()), phrases=tuple(p for p in phrases if p))


def matches(query: Query, summary: Summary) -> bool:
    """Whether a session matches the query."""
    haystack = "\n".join(filter(None, (summary.id, summary.name, summary.title, " ".join(summary.tags),
                                       summary.workspace, summary.path, summary.created, summary.updated)))
    if query.pattern is not None:
        return bool(query.pattern.search(haystack))
    lowered = haystack.lower()
    tokens = re.split(r"[\s/_.-]+", lowered)
    return (all(_fuzzy(word, lowered, tokens) for word in query.words)
            and all(phrase in haystack for phrase in query.phrases))


def _fuzzy(word: str, lowered: str, tokens: list[str]) -> bool:
    """A word matches as a substring anywhere, or (from 3 letters) as letters in order within one word: rfctr ~ refactor."""
    if word in lowered:
        return True
    return len(word) >= 3 and any(_in_order(word, token) for token in tokens if len(token) >= len(word))


def _in_order(letters: str, token: str) -> bool:
    rest = iter(token)
    return all(letter in rest for letter in letters)


def age(stamp: str | None, now: float) -> str:
    """'12m ago' style relative age of an ISO time stamp; the date itself beyond a month."""
    moment = _parse(stamp)
    if moment is None:
        return "?"
    seconds = now - moment.timestamp()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago" if unit != "d" or seconds < 30 * 86400 else moment.date().isoformat()
    return "just now"


def money(summary: Summary) -> str:
    """The session's cost: real when known, `n/a` when nothing is priced, `≥` a known subtotal."""
    if summary.cost_nanos is None:
        return "n/a"
    return cost.format_usd(summary.cost_nanos) if summary.cost_complete else "≥" + cost.format_usd(summary.cost_nanos)


def line(summary: Summary, now: float, paths: bool = False) -> str:
    """One row of `sessions list`."""
    if summary.error:
        return sanitize(f"{summary.id}  damaged: {summary.error} (khaelor sessions repair {summary.id})")
    label = summary.title or "(no request yet)"
    if summary.name:
        label = f"{summary.name} — {label}"
    tags = "".join(f" #{tag}" for tag in summary.tags)
    where = f"  [{summary.workspace}]" if paths and summary.workspace else ""
    return sanitize(f"{summary.id}  {age(summary.updated, now):>9}  {summary.messages:>4} msgs  "
                    f"{money(summary):>10}  {label}{tags}{where}")


def as_json(summary: Summary) -> dict:
    """A session of `sessions list --json`."""
    data = asdict(summary)
    for key in ("folder", "mtime_ns", "meta_mtime_ns"):
        data.pop(key)
    data["cost_usd"] = None if summary.cost_nanos is None else cost.nanos_to_usd(summary.cost_nanos)
    return data


def inspect(log: Path, pricing: Mapping | None = None) -> dict:
    """Everything `sessions inspect` reports, as plain data (JournalError when the log is damaged)."""
    from khaelor import ledger
    from khaelor.journal import read_log
    from khaelor.session import SessionState

    contents = read_log(log)
    state = SessionState.from_records(contents.records)
    header, names = contents.records[0], metadata.load(log)
    branch = {entry["id"] for entry in state.branch()}
    parents = {entry.get("parent") for entry in state.entries.values()}
    leaves = [_entry_view(entry, branch, state.head) for entry in state.entries.values() if entry["id"] not in parents]
    spent = ledger.build(state.usage, state.uncertain, pricing)
    return {
        "id": log.stem, "path": str(log), "title": metadata.title(log), "name": names["name"], "tags": names["tags"],
        "workspace": header.get("workspace"), "parent_session": header.get("parent_session"),
        "created": header.get("created"), "updated": contents.records[-1].get("ts"),
        "size": contents.size, "records": len(contents.records), "torn_tail_offset": contents.torn_offset,
        "entries": len(state.entries), "branch_messages": sum(1 for e in state.branch() if e.get("message")),
        "head": _entry_view(state.entries[state.head], branch, state.head) if state.head else None,
        "model": state.model or header.get("model"), "closed_cleanly": state.closed,
        "checkpoints": [{"id": e["id"], "ts": e.get("ts"), "on_head_branch": e["id"] in branch}
                        for e in state.entries.values() if e.get("kind") == "compaction"],
        "roots": [e["id"] for e in state.entries.values() if e.get("parent") is None],
        "leaves": leaves,
        "uncertain_attempts": len(state.uncertain),
        "usage": ledger.as_json(spent),
        "cost": ledger.report(spent),
    }


def inspect_lines(report: dict) -> list[str]:
    """The text form of an inspect report."""
    torn = report["torn_tail_offset"]
    size = f"{report['size']:,} bytes, {report['records']} records"
    if torn is not None:
        size += f", torn final line at byte {torn} (khaelor sessions repair {report['id']} removes it)"
    head = report["head"]
    lines = [f"session      {report['id']}",
             f"title        {report['title'] or '(no request yet)'}",
             f"name         {report['name'] or '-'}" + (f"   tags: {', '.join(report['tags'])}" if report["tags"] else ""),
             f"workspace    {report['workspace']}",
             f"file         {report['path']} ({size})",
             f"created      {report['created']}   updated {report['updated']}",
             f"model        {report['model'] or '-'}",
             f"entries      {report['entries']} ({report['branch_messages']} messages on the active branch)",
             "head         " + (f"{head['id']} {head['kind']} {head['ts']}" if head else "none (empty branch)"),
             f"checkpoints  {len(report['checkpoints'])}" + "".join(
                 f"\n  {c['id']} {c['ts']}" + ("" if c["on_head_branch"] else " (abandoned branch)")
                 for c in report["checkpoints"]),
             f"roots        {', '.join(report['roots']) or 'none'}",
             f"leaves       {len(report['leaves'])}"]
    for leaf in report["leaves"]:
        mark = "head" if leaf["is_head"] else "on the active branch" if leaf["on_head_branch"] else "abandoned fork"
        lines.append(f"  {leaf['id']} {leaf['kind']} {leaf['ts']} — {mark}" + (f": {leaf['text']}" if leaf["text"] else ""))
    lines += report["cost"]
    lines.append(f"uncertain    {report['uncertain_attempts']} attempt(s) with unknown usage")
    return [sanitize(text) for text in "\n".join(lines).split("\n")]


def _entry_view(entry: dict, branch: set[str], head: str | None) -> dict:
    text = _preview(entry.get("message") or {})
    return {"id": entry["id"], "kind": entry.get("kind"), "ts": entry.get("ts"), "is_head": entry["id"] == head,
            "on_head_branch": entry["id"] in branch, "text": text}


def _preview(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return " ".join(str(content or "").split())[:PREVIEW_WIDTH]


def _parse(stamp: str | None) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
    except ValueError:
        return None
