"""The session goal (SPEC §11): a durable objective KHAELOR keeps working toward.

The goal lives in a private per-session store, `.goals/<session-id>.json`
beside the session's log, replaced atomically; a new or forked session
starts without one. While the goal is active, every settled turn is followed
by a continuation request until the model answers `GOAL_COMPLETE`,
`GOAL_BLOCKED: <reason>`, or the stored budget of continuations is spent.
A store that cannot be written fails closed: the command reports why and no
continuation happens. This module is pure apart from the store's reads and
writes.
"""

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from khaelor.errors import KhaelorError
from khaelor.metadata import write_private_json

STATES = ("active", "paused", "complete", "blocked")
MAX_GOAL_BYTES = 64 << 10
_COMPLETE = re.compile(r"^\s*GOAL_COMPLETE\s*$", re.MULTILINE)
_BLOCKED = re.compile(r"^\s*GOAL_BLOCKED:\s*(.+?)\s*$", re.MULTILINE)


class GoalStoreError(KhaelorError):
    """The goal store could not be read or written; nothing was changed."""


@dataclass
class Goal:
    """An objective, its state and its budget of automatic continuations."""

    objective: str
    state: str = "active"
    budget: int = 10
    used: int = 0
    reason: str = ""
    updated: float = 0.0

    @property
    def wants_continuation(self) -> bool:
        return self.state == "active" and self.used < self.budget

    def describe(self) -> str:
        detail = f" — {self.reason}" if self.reason else ""
        return f"goal {self.state} ({self.used}/{self.budget} continuations): {self.objective}{detail}"

    def status_word(self) -> str:
        """The goal segment of the status line."""
        return f"goal {self.state} {self.used}/{self.budget}"


def store_path(log: Path) -> Path:
    return log.parent / ".goals" / f"{log.stem}.json"


def load(log: Path) -> Goal | None:
    """The session's goal, if one is set; GoalStoreError when the store is unreadable or damaged."""
    path = store_path(log)
    try:
        with open(path, "rb") as handle:
            data = json.loads(handle.read(MAX_GOAL_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise GoalStoreError(f"cannot read the goal store {path}: {exc}") from None
    try:
        goal = Goal(**{key: data[key] for key in Goal.__dataclass_fields__ if key in data})
    except TypeError as exc:
        raise GoalStoreError(f"the goal store {path} is damaged: {exc}") from None
    if goal.state not in STATES:
        raise GoalStoreError(f"the goal store {path} has an unknown state {goal.state!r}")
    return goal


def save(log: Path, goal: Goal | None) -> None:
    """Replace (or, with None, clear) the stored goal; GoalStoreError when it cannot be written."""
    path = store_path(log)
    try:
        if goal is None:
            path.unlink(missing_ok=True)
        else:
            goal.updated = time.time()
            write_private_json(path, asdict(goal))
    except OSError as exc:
        raise GoalStoreError(f"cannot write the goal store {path}: {exc.strerror or exc}") from None


def continuation(goal: Goal) -> str:
    """The message sent on the person's behalf to keep working toward the goal."""
    return (f"Continue working toward the session goal: {goal.objective}\n"
            f"(automatic continuation {goal.used + 1} of {goal.budget}). When the goal is fully achieved, reply "
            "with GOAL_COMPLETE on a line of its own. If you cannot make progress without the person, reply with "
            "GOAL_BLOCKED: <the reason> on a line of its own.")


def settle(goal: Goal, reply_text: str) -> Goal:
    """The goal after a settled turn whose final text was `reply_text`."""
    blocked = _BLOCKED.search(reply_text)
    if _COMPLETE.search(reply_text):
        goal.state, goal.reason = "complete", ""
    elif blocked:
        goal.state, goal.reason = "blocked", blocked.group(1)
    elif goal.state == "active" and goal.used >= goal.budget:
        goal.state, goal.reason = "paused", f"the budget of {goal.budget} continuations is spent"
    return goal


def after_turn(log: Path, reply_text: str) -> Goal | None:
    """Fold a settled turn's final text into the stored goal; returns it (None when there is none)."""
    goal = load(log)
    if goal is None or goal.state != "active":
        return goal
    goal = settle(goal, reply_text)
    save(log, goal)
    return goal


def take_continuation(log: Path) -> str | None:
    """Spend one continuation of an active goal and return its message; None when none is due."""
    goal = load(log)
    if goal is None or not goal.wants_continuation:
        if goal is not None and goal.state == "active":
            save(log, settle(goal, ""))
        return None
    message = continuation(goal)
    goal.used += 1
    save(log, goal)
    return message


def pause_after_interruption(log: Path) -> Goal | None:
    """An active goal of a run that did not close cleanly waits for /goal resume."""
    goal = load(log)
    if goal is not None and goal.state == "active":
        goal.state, goal.reason = "paused", "the previous run was interrupted; /goal resume to continue"
        save(log, goal)
    return goal
