"""The status line: model · context pressure · session cost · git branch (SPEC §3).

Pure figures from the session state: context pressure is the last reply's
real prompt plus output tokens over the model's context window (`n/a` before
the first reply or for a model whose window is unknown); cost comes from the
price table (`n/a` when a price is unknown, "known" when some attempt's usage
is uncertain). Nothing here estimates.
"""

from dataclasses import dataclass
from pathlib import Path

from khaelor import cost

SUGGEST_AT = 0.80
URGENT_AT = 0.90
CONTEXT_WINDOWS = {
    "claude-fable-5-2": 1_000_000, "claude-fable-5-1": 1_000_000, "claude-mythos-5-1": 1_000_000,
    "claude-opus-5-5": 1_000_000, "claude-sonnet-5-5": 1_000_000, "claude-haiku-5-5": 1_000_000,
    "claude-opus-5": 1_000_000, "claude-sonnet-5": 1_000_000,
    "claude-opus-4-8": 200_000, "claude-opus-4-7": 200_000, "claude-opus-4-6": 200_000, "claude-opus-4-5": 200_000,
    "claude-sonnet-4-6": 200_000, "claude-sonnet-4-5": 200_000, "claude-haiku-4-5": 200_000,
}


@dataclass(frozen=True)
class Status:
    """What the status line shows."""

    model: str
    context: float | None
    cost_nanos: int | None
    uncertain: int
    branch: str | None
    goal: str | None = None

    def level(self) -> str:
        """'urgent' at ≥90% context, 'suggest' at ≥80%, else 'ok'."""
        if self.context is None:
            return "ok"
        return "urgent" if self.context >= URGENT_AT else "suggest" if self.context >= SUGGEST_AT else "ok"

    def text(self) -> str:
        context = "context n/a" if self.context is None else f"context {self.context:.0%}"
        level = self.level()
        if level == "suggest":
            context += " · /compact suggested"
        elif level == "urgent":
            context += " · CONTEXT NEARLY FULL — /compact now"
        money = cost.format_usd(self.cost_nanos)
        if self.uncertain and self.cost_nanos is not None:
            money = f"known {money} + {self.uncertain} uncertain"
        parts = [self.model, context, money]
        if self.branch:
            parts.append(self.branch)
        if self.goal:
            parts.append(self.goal)
        return " · ".join(parts)


def context_window(model: str) -> int | None:
    base = model.rsplit("-", 1)[0] if model[-8:].isdigit() else model
    return CONTEXT_WINDOWS.get(base)


def context_fraction(usage_record: dict | None, model: str) -> float | None:
    """Share of the window the context used at the last reply, from its real usage."""
    window = context_window(model)
    if not usage_record or not window:
        return None
    usage = usage_record.get("usage") or {}
    used = cost.prompt_tokens(usage) + (usage.get("output_tokens") or 0)
    return used / window


def git_branch(workspace: Path) -> str | None:
    """The checked-out branch, read from .git/HEAD without running git."""
    for folder in (workspace, *workspace.parents):
        head = folder / ".git" / "HEAD"
        if head.is_file():
            try:
                text = head.read_text(encoding="utf-8", errors="replace")[:256].strip()
            except OSError:
                return None
            return text.removeprefix("ref: refs/heads/") if text.startswith("ref:") else text[:12]
        if (folder / ".git").exists():
            return None
    return None
