"""Asking the person: the question a front end shows, and what its answer decides (SPEC §5).

Owns the prompt protocol between the agent and a front end. The agent calls
the front end's `ask(question: Question) -> Answer | None`; the REPL shows
`question.subject` and `question.reason` and offers `question.scopes` —
allow once · allow for this session · always allow · deny (with a message
to the model), deny-safe by default. `answered()` turns the answer into the
journaled `Decision` (grantor `user`): `session` and `always` grant
`question.rules` for the rest of the session (replayed on resume), and
`always` also saves them to `.khaelor/config.local.yaml`. No answer — None,
EOF, anything that is not an `Answer` — denies: silence is never consent.
With nobody to ask (print mode), `unattended()` makes every question a
denial that names the `--allow` rule which would permit the call.
"""

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from khaelor.errors import KhaelorError
from khaelor.permissions import Decision
from khaelor.rulefile import save_rules

SCOPES = ("once", "session", "always", "deny")


@dataclass(frozen=True)
class Question:
    """What a front end asks the person about one call (SPEC §5 interactive prompt)."""

    call_id: str
    tool: str
    input: dict
    subject: str
    """The exact command line or resolved path."""
    reason: str
    """Why it asks."""
    rules: tuple[str, ...] = ()
    """What 'this session' and 'always' would grant; empty means only once or deny make sense."""

    @property
    def scopes(self) -> tuple[str, ...]:
        """The answers worth offering: 'session' and 'always' only when a rule can describe the call."""
        return SCOPES if self.rules else ("once", "deny")

    def as_record(self) -> dict:
        """The fields of the journal's `permission_request` record."""
        return {"call_id": self.call_id, "tool": self.tool, "input": self.input, "reason": self.reason,
                "subject": self.subject, "rules": list(self.rules)}


@dataclass(frozen=True)
class Answer:
    """The person's answer: once, session, always or deny (with an optional message to the model)."""

    scope: str
    message: str = ""


def allow_flags(rules: Iterable[str]) -> str:
    """The `--allow` options that would add `rules`, quoted for a shell."""
    return " ".join(f"--allow {shlex.quote(rule)}" for rule in rules)


def unattended(decision: Decision) -> Decision:
    """What an ask becomes with nobody to answer (print mode): a denial naming the --allow that would permit it."""
    hint = f" — rerun with {allow_flags(decision.suggestions)} to allow it" if decision.suggestions else ""
    return replace(decision, verdict="deny", reason=f"{decision.reason}; print mode never prompts{hint}",
                   source="print-mode")


def answered(question: Question, answer: Answer | None, workspace: Path) -> Decision:
    """The decision a person's answer makes. No answer (None, EOF, anything else) denies."""
    subject = question.subject
    if not isinstance(answer, Answer) or answer.scope not in SCOPES:
        return Decision("deny", "no answer was given, and silence is never consent", source="no-answer",
                        subject=subject)
    if answer.scope == "deny":
        message = (answer.message or "").strip()
        return Decision("deny", "denied by the person" + (f": {message}" if message else ""), source="user",
                        subject=subject, scope="deny", message=message or None)
    grants = question.rules if answer.scope in ("session", "always") else ()
    if not grants:
        return Decision("allow", "allowed once by the person", source="user", subject=subject, scope="once")
    scope, reason = answer.scope, "allowed for this session by the person"
    if scope == "always":
        try:
            reason = f"always allowed by the person (saved to {save_rules(workspace, grants)})"
        except (OSError, KhaelorError) as exc:
            scope, reason = "session", f"{reason}; saving it failed: {getattr(exc, 'message', None) or exc}"
    return Decision("allow", reason, "; ".join(grants), "user", subject=subject, scope=scope, grants=grants)
