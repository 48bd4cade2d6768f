"""The agent loop, shared by print mode and the REPL (SPEC §4).

One turn: append the person's message, then repeat — send the branch to the
model, journal the complete reply, run the tools it asked for (each through
the permission decision point), journal the results — until the model ends
its turn or a limit stops it. Every step is journaled as it happens, so a
crash at any point leaves a log that resume can settle without re-running
anything. Tool failures become `is_error` results; they never end the loop.
"""

import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from khaelor import compaction, ledger
from khaelor.errors import KhaelorError
from khaelor.ledger import ceiling_refusal
from khaelor.model import ModelClient, Reply
from khaelor.asking import Answer, Question, answered, unattended
from khaelor.permissions import Decision, Policy, ToolCall, decide
from khaelor.prompt import build_request
from khaelor.session import Session, ToolCallState, tool_result_block
from khaelor.status import context_fraction
from khaelor.tools import get_tool
from khaelor.tools.base import ToolContext, ToolError

DONE = ("end_turn", "stop_sequence")
FAILED_STOPS = {
    "max_tokens": "the reply was cut off at the max_tokens limit ({max_tokens}); raise max_tokens or ask for less at once",
    "refusal": "the model declined to continue{details}",
    "model_context_window_exceeded": "the conversation no longer fits the model's context window",
}


@dataclass
class Outcome:
    """How a turn ended."""

    text: str
    stop_reason: str
    is_error: bool
    turns: int
    denials: list[dict] = field(default_factory=list)


@dataclass
class Settings:
    """Per-session values the loop needs."""

    model: str
    max_tokens: int
    system: str
    max_turns: int | None = None
    auto_compact_at: float = 0.92
    max_cost_nanos: int | None = None
    pricing: dict = field(default_factory=dict)


class CostCeiling(KhaelorError):
    """The cost ceiling forbids the next model call; nothing was sent."""

    stop_reason = "max_cost"


class ToolWatcher(Protocol):
    """Something that observes each approved tool call around its execution (e.g. file-change attribution)."""

    def before(self, call_id: str, name: str, arguments) -> None: ...

    def after(self, call_id: str, name: str, arguments) -> None: ...


class Agent:
    """Runs turns of one session.

    `ask(question) -> Answer | None` answers permission questions (the REPL's
    prompt); without it (print mode) every ask becomes a denial naming the
    `--allow` rule. A `permission_request` is journaled before asking, so a
    question pending when the process dies is asked again on resume
    (`resume_pending`); no answer (None, EOFError) denies.
    """

    def __init__(self, session: Session, client: ModelClient, ctx: ToolContext, policy: Policy,
                 settings: Settings, tools: tuple, ask: Callable[[Question], Answer | None] | None = None):
        self.session = session
        self.client = client
        self.ctx = ctx
        self.policy = policy
        self.settings = settings
        self.tools = tools
        self.ask = ask
        self.definitions = [tool.definition() for tool in tools]
        self.watchers: list[ToolWatcher] = []
        self._carried: list[dict] = []
        self._spent = ledger.Ledger()

    def run(self, prompt: str, operation: str = "turn") -> Outcome:
        """Carry out one request until the model ends its turn or a limit stops it.

        `operation` tags the usage of every model call of the turn ("turn", or
        "goal" for an automatic continuation).
        """
        self.session.add_entry("user", {"role": "user", "content": [{"type": "text", "text": prompt}]})
        turns, denials, overflowed = 0, self._carried, False
        self._carried = []
        while True:
            if self.settings.max_turns is not None and turns >= self.settings.max_turns:
                return Outcome(f"stopped after {turns} model turns (--max-turns)", "max_turns", True, turns, denials)
            reply = self._reply(operation)
            turns += 1
            if reply.stop_reason == "model_context_window_exceeded" and not overflowed:
                overflowed = True
                if self._compact_or_notice("the context window was exceeded"):
                    continue
            self.session.add_entry("assistant", reply.message, model=self.settings.model,
                                   stop_reason=reply.stop_reason, message_id=reply.message_id)
            if reply.stop_reason == "tool_use":
                denials += self._run_tools(reply)
            elif reply.stop_reason == "pause_turn":
                continue
            elif reply.stop_reason in DONE:
                return Outcome(_text(reply), reply.stop_reason, False, turns, denials)
            else:
                return self._failed_stop(reply, turns, denials)

    def _reply(self, operation: str) -> Reply:
        pressure = context_fraction(self.session.state.last_turn_usage, self.settings.model)
        if pressure is not None and pressure >= self.settings.auto_compact_at:
            self._compact_or_notice(f"context at {pressure:.0%}")
        return self._send(self.session.state.messages(), operation)

    def _compact_or_notice(self, reason: str) -> bool:
        """Compact automatically; a failure is announced and leaves the context as it was."""
        try:
            self.compact(reason=reason)
        except compaction.CompactionFailed as exc:
            self.client.notice(f"{exc.message}; continuing with the full context")
            return False
        return True

    def spent(self) -> ledger.Ledger:
        """The session's running ledger, brought up to date with the usage recorded since the last look."""
        state = self.session.state
        return ledger.update(self._spent, state.usage, state.uncertain, self.settings.pricing)

    def _send(self, messages: list[dict], operation: str) -> Reply:
        """One model call on the session's stable prefix, after the cost ceiling allows it."""
        if self.settings.max_cost_nanos is not None:
            refusal = ceiling_refusal(self.spent(), self.settings.max_cost_nanos, self.settings.model,
                                      self.settings.pricing)
            if refusal:
                raise CostCeiling(refusal)
        request = build_request(self.settings.model, self.settings.max_tokens, self.settings.system,
                                self.definitions, messages)
        return self.client.send(request, self.session.record, operation=operation)

    def aside(self, messages: list[dict], operation: str) -> str:
        """A one-off request on the session's prefix that is not part of the conversation; the reply's text."""
        return _text(self._send(messages, operation))

    def compact(self, instructions: str = "", reason: str = "requested") -> str:
        """Replace the older context by a validated checkpoint plus evidence; returns the entry id."""
        plan = compaction.plan(self.session.state)
        if plan is None:
            raise compaction.CompactionFailed("nothing to compact yet")
        problem = ""
        for attempt in range(2):
            note = f"\n\nYour previous checkpoint was rejected: {problem}. Reply with the YAML only." if attempt else ""
            reply = self._send(compaction.request_messages(plan.span, instructions + note), "compaction")
            try:
                checkpoint = compaction.parse_checkpoint(_text(reply))
                break
            except ValueError as exc:
                problem = str(exc)
        else:
            self.session.record("compaction_failed", reason=problem)
            raise compaction.CompactionFailed(
                f"compaction failed: the checkpoint was invalid twice ({problem}); nothing was compacted")
        state = self.session.state
        found = compaction.evidence(state)
        return self.session.add_entry(
            "compaction", compaction.checkpoint_message(checkpoint, found), checkpoint=checkpoint, evidence=found,
            boundary=plan.boundary, reason=reason, files_read=sorted(state.file_state.known),
            processes=sorted(state.processes))

    def _failed_stop(self, reply: Reply, turns: int, denials: list[dict]) -> Outcome:
        calls = self.session.state.unanswered_calls()
        if calls:
            self.session.settle_calls(calls)
        details = (reply.stop_details or {}).get("explanation")
        template = FAILED_STOPS.get(reply.stop_reason, "the model stopped unexpectedly ({stop_reason})")
        reason = template.format(max_tokens=self.settings.max_tokens, details=f": {details}" if details else "",
                                 stop_reason=reply.stop_reason)
        text = _text(reply)
        return Outcome(f"{text}\n\n[{reason}]" if text else reason, reply.stop_reason, True, turns, denials)

    def _run_tools(self, reply: Reply) -> list[dict]:
        uses = [block for block in reply.message["content"] if block.get("type") == "tool_use"]
        denials, blocks = [], []
        try:
            for use in uses:
                content, is_error, denial = self._run_one(use)
                blocks.append(tool_result_block(use["id"], content, is_error))
                if denial:
                    denials.append(denial)
        except BaseException as exc:
            self._settle_interrupted(exc)
            raise
        self.session.add_entry("tool_results", {"role": "user", "content": blocks})
        return denials

    def _run_one(self, use: dict) -> tuple[str, bool, dict | None]:
        call_id, name, arguments = use["id"], use["name"], use.get("input")
        self.session.record("tool_request", call_id=call_id, name=name, input=arguments)
        call = ToolCall(name, arguments if isinstance(arguments, dict) else {})
        return self._act(call_id, name, arguments, self._decide(call_id, call))

    def resume_pending(self, call: ToolCallState) -> str:
        """Ask again a permission request a dead run left unanswered; the call runs only if it is now allowed."""
        arguments = call.input if isinstance(call.input, dict) else {}
        decision = self._decide(call.call_id, ToolCall(call.name, arguments))
        _, _, denial = self._act(call.call_id, call.name, call.input, decision)
        if denial:
            self._carried.append(denial)
        outcome = "allowed, and it ran" if denial is None else f"denied: {decision.reason}"
        return f"the permission request of the previous run for {call.name} was asked again — {outcome}"

    def _act(self, call_id: str, name: str, arguments, decision: Decision) -> tuple[str, bool, dict | None]:
        """Journal the decision, then run the call or report its denial."""
        record = self.session.record
        record("permission", call_id=call_id, **decision.as_record())
        if decision.verdict != "allow":
            content = f"Permission denied: {decision.reason}"
            record("tool_result", call_id=call_id, is_error=True, content=content)
            return content, True, {"tool": name, "input": arguments, "reason": decision.reason,
                                   "rule": decision.rule, "source": decision.source,
                                   "allow": list(decision.suggestions)}
        record("tool_start", call_id=call_id)
        started = time.monotonic()
        for watcher in self.watchers:
            watcher.before(call_id, name, arguments)
        try:
            content, is_error = self._execute(call_id, name, arguments)
        finally:
            for watcher in self.watchers:
                watcher.after(call_id, name, arguments)
        record("tool_result", call_id=call_id, is_error=is_error, content=content,
               duration_ms=int((time.monotonic() - started) * 1000))
        return content, is_error, None

    def _decide(self, call_id: str, call: ToolCall) -> Decision:
        """The engine's decision; an ask is put to the person, journaled first so a crash cannot lose it."""
        policy = self.policy.with_grants(self.session.state.grants)
        decision = decide(call, policy)
        if decision.verdict != "ask":
            return decision
        if self.ask is None:
            return unattended(decision)
        question = Question(call_id, call.tool, call.input, decision.subject, decision.reason, decision.suggestions)
        if call_id not in self.session.state.pending:
            self.session.record("permission_request", **question.as_record())
        try:
            answer = self.ask(question)
        except EOFError:
            answer = None
        return answered(question, answer, policy.workspace)

    def _execute(self, call_id: str, name: str, arguments) -> tuple[str, bool]:
        tool = get_tool(name)
        if tool is None or tool not in self.tools:
            return f"unknown tool {name!r}", True
        if not isinstance(arguments, dict):
            return "tool input must be a JSON object", True
        self.ctx.call_id = call_id
        try:
            return tool.run(self.ctx, arguments), False
        except ToolError as exc:
            return str(exc), True
        except Exception as exc:  # a tool bug must not end the session
            return f"internal error in the {name} tool: {type(exc).__name__}: {exc}", True

    def _settle_interrupted(self, exc: BaseException) -> None:
        """Give every call of the interrupted reply a truthful result before re-raising."""
        state = self.session.state
        for call in state.unanswered_calls():
            known = state.calls.get(call.call_id)
            if known and known.started and known.result is None:
                self.session.record("tool_result", call_id=call.call_id, is_error=True,
                                    content=f"Interrupted ({_signal_name(exc)}) while running; it was stopped "
                                            "and its effects may be partial.")
        self.session.settle_calls(state.unanswered_calls())


def _signal_name(exc: BaseException) -> str:
    return getattr(exc, "signal_name", "SIGINT" if isinstance(exc, KeyboardInterrupt) else type(exc).__name__)


def _text(reply: Reply) -> str:
    return "".join(block.get("text", "") for block in reply.message["content"] if block.get("type") == "text")
