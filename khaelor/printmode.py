"""Print mode: run one request to completion from a script and report it (SPEC §2).

Never prompts: a call that would need to ask is denied, the model is told
why, and the result lists the denial with the rule that would allow it.
Output formats: `text` (the final answer), `json` (one result object) and
`stream-json` (each journal record as a JSON line as it happens, then the
result object). Exit status: 0 success, 1 task error, 2 usage, 130/143
interrupted.
"""

import json
import sys
from dataclasses import asdict, dataclass

from khaelor import cost, goal, ledger
from khaelor.agent import Outcome
from khaelor.env import Env
from khaelor.errors import Cancelled, ExitStatus, KhaelorError, UsageError
from khaelor.model import credentials
from khaelor.output import sanitize
from khaelor.runtime import Options, Runtime, raise_on_sigterm, start

MAX_STDIN_BYTES = 16 << 20
FORMATS = ("text", "json", "stream-json")


@dataclass
class PrintRequest:
    """A print-mode invocation."""

    prompt: str | None
    output_format: str
    options: Options
    goal: str | None = None


def read_prompt(env: Env, argument: str | None, optional: bool = False) -> str:
    """The prompt from the argument and/or piped stdin (appended), bounded."""
    parts = [argument] if argument else []
    if not env.stdin_is_tty():
        piped = _read_stdin(env)
        if piped.strip():
            parts.append(piped)
    prompt = "\n\n".join(parts).strip()
    if not prompt and not optional:
        raise UsageError("no prompt: give it as an argument or on standard input", hint="khaelor -p 'fix the failing test'")
    return prompt


def _read_stdin(env: Env) -> str:
    stream = getattr(env.stdin, "buffer", None)
    if stream is None:
        text = env.stdin.read(MAX_STDIN_BYTES + 1)
        data = text.encode("utf-8", "surrogateescape")
    else:
        data = stream.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise UsageError(f"standard input is larger than {MAX_STDIN_BYTES >> 20} MiB; pass a file path in the prompt instead")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"standard input is not valid UTF-8 (byte {exc.start})") from None


def run(request: PrintRequest, env: Env) -> int:
    """Run print mode; returns the exit status."""
    prompt = read_prompt(env, request.prompt, optional=bool(request.goal))
    credentials(env.environ)
    streaming = request.output_format == "stream-json"
    runtime = start(env, request.options, notice=lambda line: _stderr(env, line))
    if streaming:
        runtime.session.journal.listeners.append(lambda record: _emit(env, record))
    for note in runtime.recovered:
        _stderr(env, note)
    restore = raise_on_sigterm()
    try:
        if request.goal:
            outcome, status = _pursue_goal(runtime, request.goal, prompt)
        else:
            outcome, status = _run_turn(runtime, prompt)
    finally:
        restore()
        runtime.close()
    _report(env, request.output_format, runtime, outcome)
    return status


def _pursue_goal(runtime: Runtime, objective: str, prompt: str) -> tuple[Outcome, int]:
    """Work toward a goal: the first request, then continuations until it is complete, blocked or out of budget.

    --max-turns bounds the model turns of the whole run, --max-cost its money.
    """
    log, settings = runtime.session.path, runtime.agent.settings
    limit = settings.max_turns
    goal.save(log, goal.Goal(objective, budget=runtime.config.goal.budget))
    outcome, status = _run_turn(runtime, prompt or objective)
    turns, denials = outcome.turns, list(outcome.denials)
    while status == ExitStatus.SUCCESS and goal.after_turn(log, outcome.text).wants_continuation:
        if limit is not None and turns >= limit:
            text = f"stopped after {turns} model turns (--max-turns)"
            return Outcome(text, "max_turns", True, turns, denials), ExitStatus.ERROR
        settings.max_turns = None if limit is None else limit - turns
        outcome, status = _run_turn(runtime, goal.take_continuation(log), "goal")
        turns, denials = turns + outcome.turns, denials + outcome.denials
    if status != ExitStatus.SUCCESS:
        return Outcome(outcome.text, outcome.stop_reason, True, turns, denials), status
    final = goal.load(log)
    done = final.state == "complete"
    text = outcome.text if done else f"{outcome.text}\n\n[{final.describe()}]"
    return Outcome(text, f"goal_{final.state}", not done, turns, denials), ExitStatus.SUCCESS if done else ExitStatus.ERROR


def _run_turn(runtime: Runtime, prompt: str, operation: str = "turn") -> tuple[Outcome, int]:
    agent = runtime.agent
    try:
        outcome = agent.run(prompt, operation=operation)
    except (KeyboardInterrupt, Cancelled) as exc:
        name = getattr(exc, "signal_name", "SIGINT")
        runtime.session.record("cancel", signal=name)
        status = ExitStatus.TERMINATED if name == "SIGTERM" else ExitStatus.INTERRUPTED
        return Outcome(f"interrupted by {name}", "cancelled", True, 0), status
    except KhaelorError as exc:
        runtime.session.record("error", message=exc.message)
        return Outcome(exc.message, getattr(exc, "stop_reason", "error"), True, 0), ExitStatus.ERROR
    runtime.session.record("turn_end", stop_reason=outcome.stop_reason, is_error=outcome.is_error, turns=outcome.turns)
    return outcome, ExitStatus.ERROR if outcome.is_error else ExitStatus.SUCCESS


def result_object(runtime: Runtime, outcome: Outcome) -> dict:
    """The §2 JSON result of a print-mode run."""
    state = runtime.session.state
    spent = runtime.agent.spent()
    return {
        "type": "result",
        "result": outcome.text,
        "session_id": runtime.session.id,
        "num_turns": outcome.turns,
        "usage": state.usage_totals(),
        "cost_usd": None if spent.unpriced_models else cost.nanos_to_usd(spent.total.nanos),
        "usage_uncertain_attempts": spent.uncertain,
        "cost": ledger.as_json(spent),
        "is_error": outcome.is_error,
        "stop_reason": outcome.stop_reason,
        "permission_denials": outcome.denials,
        "goal": _goal_json(runtime),
    }


def _goal_json(runtime: Runtime) -> dict | None:
    try:
        current = goal.load(runtime.session.path)
    except goal.GoalStoreError:
        return None
    return asdict(current) if current else None


def _report(env: Env, output_format: str, runtime: Runtime, outcome: Outcome) -> None:
    for denial in outcome.denials:
        _stderr(env, f"khaelor: denied {denial['tool']}: {denial['reason']}")
    if output_format == "text":
        if outcome.is_error:
            _stderr(env, f"khaelor: {outcome.text}")
        else:
            text = outcome.text.rstrip("\n")
            env.stdout.write((sanitize(text) if env.stdout_is_tty() else text) + "\n")
    else:
        _emit(env, result_object(runtime, outcome))
    env.stdout.flush()


def _emit(env: Env, obj: dict) -> None:
    env.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    env.stdout.flush()


def _stderr(env: Env, line: str) -> None:
    stream = env.stderr or sys.stderr
    stream.write(line + "\n")
    stream.flush()
