"""How the REPL shows what happens: journal records in, styled lines out.

The REPL is a view of the record stream — the same records the log holds —
so what the person sees and what the log says cannot diverge. Pure logic:
each function returns `(text, style)` pairs; the output façade sanitizes and
writes them.
"""

from dataclasses import dataclass, field

FOLD_LINES = 6
SUMMARY_WIDTH = 100
DIFF_LINES = 40

Line = tuple[str, str | None]


def summarize(name: str, arguments) -> str:
    """The one argument that says what a call does, shortened to one line."""
    if not isinstance(arguments, dict):
        return ""
    key = {"bash": "command", "glob": "pattern", "grep": "pattern"}.get(name, "path")
    if name == "process":
        value = " ".join(str(arguments.get(k, "")) for k in ("action", "id", "command") if arguments.get(k))
    else:
        value = str(arguments.get(key, ""))
    value = " ".join(value.split())
    return value if len(value) <= SUMMARY_WIDTH else value[: SUMMARY_WIDTH - 1] + "…"


def fold(text: str, limit: int = FOLD_LINES) -> list[str]:
    """At most `limit` lines of `text`, with a note of how many were left out."""
    lines = text.rstrip("\n").split("\n") if text.strip() else []
    if len(lines) <= limit:
        return lines
    return lines[: limit - 1] + [f"… {len(lines) - limit + 1} more lines"]


def diff_lines(text: str) -> list[Line]:
    """The unified-diff part of an edit result, styled by line kind."""
    start = text.find("\n--- ")
    if start < 0:
        return []
    lines = text[start + 1:].rstrip("\n").split("\n")
    shown = lines[:DIFF_LINES]
    styled = [(line, _diff_style(line)) for line in shown]
    if len(lines) > DIFF_LINES:
        styled.append((f"… {len(lines) - DIFF_LINES} more diff lines", "dim"))
    return styled


def _diff_style(line: str) -> str | None:
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    if line.startswith("@@"):
        return "cyan"
    return None


@dataclass
class RecordView:
    """Turns the records of a running session into lines for the terminal."""

    calls: dict[str, tuple[str, object]] = field(default_factory=dict)

    def lines(self, record: dict) -> list[Line]:
        kind = record["type"]
        handler = getattr(self, f"_on_{kind}", None)
        return handler(record) if handler else []

    def _on_tool_request(self, record: dict) -> list[Line]:
        self.calls[record["call_id"]] = (record["name"], record.get("input"))
        return []

    def _on_permission(self, record: dict) -> list[Line]:
        if record.get("decision") == "allow":
            return []
        name, arguments = self.calls.get(record["call_id"], ("?", None))
        return [(f"✗ {name}  {summarize(name, arguments)} — denied: {record.get('reason', '')}", "red")]

    def _on_tool_start(self, record: dict) -> list[Line]:
        name, arguments = self.calls.get(record["call_id"], ("?", None))
        return [(f"● {name}  {summarize(name, arguments)}", "bold")]

    def _on_tool_result(self, record: dict) -> list[Line]:
        if "duration_ms" not in record:
            return []
        name, _ = self.calls.get(record["call_id"], ("?", None))
        seconds = f"{record['duration_ms'] / 1000:.1f}s"
        content = str(record.get("content", ""))
        if record.get("is_error"):
            last = content.rstrip().rsplit("\n", 1)[-1] if content.strip() else "failed"
            lines = [(f"  ✗ {last} · {seconds}", "red")]
            body = fold(content)[:-1] if name == "bash" else []
        else:
            lines = [(f"  ✓ {seconds}", "green")]
            body = fold(content) if name == "bash" else []
        lines += [(f"    {line}", "dim") for line in body]
        if name == "edit" and not record.get("is_error"):
            lines += diff_lines(content)
        return lines

    def _on_usage_uncertainty(self, record: dict) -> list[Line]:
        return [(f"  usage of an interrupted attempt is unknown ({record.get('reason')})", "dim")]
