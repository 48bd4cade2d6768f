"""The one decision point every tool call passes: `decide(call, policy) -> Decision`.

Precedence is deny > ask > allow > the mode's default. The decision names the
rule that matched and where it came from, and the agent journals it before
anything runs.

This is the conservative first engine: reads inside the workspace are
allowed; everything else needs a matching allow rule or `bypass` mode. Rules
name a tool (`bash`) or a tool and a pattern: for file tools a path glob
compared with the resolved path, for `bash` and `process` the exact command —
never a prefix, so `git status && rm -rf ~` cannot ride on `git status`.
"""

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path

MODES = ("default", "accept-edits", "plan", "bypass")
READ_TOOLS = frozenset({"read", "glob", "grep", "ls"})
EDIT_TOOLS = frozenset({"write", "edit"})
COMMAND_TOOLS = frozenset({"bash", "process"})


@dataclass(frozen=True)
class Decision:
    """allow / ask / deny, with the reason, the rule text and who granted it."""

    verdict: str
    reason: str
    rule: str | None = None
    source: str = "mode"

    def as_record(self) -> dict:
        return {"decision": self.verdict, "reason": self.reason, "rule": self.rule, "source": self.source}


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the permission engine sees it."""

    tool: str
    input: dict


@dataclass
class Policy:
    """The mode and the rules in force for a session."""

    mode: str
    workspace: Path
    allow: list = field(default_factory=list)
    ask: list = field(default_factory=list)
    deny: list = field(default_factory=list)


def rule_text(rule) -> str:
    return f"{rule.tool}: {rule.pattern}" if rule.pattern else rule.tool


def decide(call: ToolCall, policy: Policy) -> Decision:
    """The verdict for one call under `policy`."""
    for verdict, rules in (("deny", policy.deny), ("ask", policy.ask), ("allow", policy.allow)):
        for rule in rules:
            if _matches(rule, call, policy.workspace):
                text = rule_text(rule)
                return Decision(verdict, f"{verdict} rule '{text}' ({rule.source})", text, f"rule:{rule.source}")
    return _mode_default(call, policy)


def _mode_default(call: ToolCall, policy: Policy) -> Decision:
    mode = policy.mode
    if mode == "bypass":
        return Decision("allow", "bypass mode allows every call not denied by a rule")
    inside = _inside(_target(call, policy.workspace), policy.workspace)
    if call.tool in READ_TOOLS and inside:
        return Decision("allow", "reads inside the workspace are allowed")
    if mode == "accept-edits" and call.tool in EDIT_TOOLS and inside:
        return Decision("allow", "accept-edits mode allows edits inside the workspace")
    if mode == "plan":
        return Decision("deny", "plan mode is read-only" if inside or call.tool not in READ_TOOLS
                        else "plan mode reads only inside the workspace")
    where = "" if inside or call.tool in COMMAND_TOOLS else " outside the workspace"
    return Decision("ask", f"{call.tool}{where} needs permission in {mode} mode")


def _matches(rule, call: ToolCall, workspace: Path) -> bool:
    if rule.tool != call.tool:
        return False
    if not rule.pattern:
        return True
    if call.tool in COMMAND_TOOLS:
        return str(call.input.get("command", "")).strip() == rule.pattern.strip()
    target = _target(call, workspace)
    pattern = _resolve(rule.pattern, workspace)
    return fnmatch.fnmatchcase(str(target), pattern)


def _target(call: ToolCall, workspace: Path) -> Path:
    raw = call.input.get("path")
    return Path(_resolve(raw, workspace)) if isinstance(raw, str) and raw else workspace


def _resolve(raw: str, workspace: Path) -> str:
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        path = workspace / path
    return os.path.realpath(path)


def _inside(path: Path, workspace: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == Path(os.path.realpath(workspace)) or real.is_relative_to(os.path.realpath(workspace))
