"""Assembling a running session: config, store, log, tools, policy and model client.

Both front ends (print mode and the REPL) start here, so a session is opened,
resumed and closed the same way whichever one the person uses. Opening an
existing session replays its log and settles what a dead run left open
before anything new happens.
"""

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from khaelor import __version__, attribution, branching, goal
from khaelor.agent import Agent, Settings
from khaelor.config import Config, load_config
from khaelor.env import Env
from khaelor.errors import Cancelled, UsageError
from khaelor.journal import private_dir, timestamp
from khaelor.ledger import usd_to_nanos
from khaelor.model import ModelClient, RetryPolicy
from khaelor.asking import Answer, Question
from khaelor.permissions import Policy
from khaelor.prompt import environment_facts, memory_files, system_text
from khaelor.session import Session
from khaelor.store import Store, new_session_id
from khaelor.tools import all_tools, stop_background
from khaelor.tools.base import ToolContext


@dataclass
class Options:
    """What the command line asked for, independent of argparse."""

    model: str | None = None
    permission_mode: str | None = None
    session_dir: str | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    continue_latest: bool = False
    resume: str | None = None
    fork: str | None = None
    max_turns: int | None = None
    max_cost: float | None = None

    def overrides(self) -> dict:
        """The options that override configuration, in config shape."""
        result: dict = {}
        for key in ("model", "permission_mode", "session_dir", "max_cost"):
            if getattr(self, key) is not None:
                result[key] = getattr(self, key)
        rules = {kind: list(getattr(self, kind)) for kind in ("allow", "deny") if getattr(self, kind)}
        if rules:
            result["permissions"] = rules
        return result


def workspace_of(env: Env) -> Path:
    return Path(os.path.realpath(env.cwd))


def make_store(env: Env, config: Config) -> Store:
    root = Path(config.session_dir) if config.session_dir else env.home / "sessions"
    return Store(root, env.home)


def open_session(env: Env, config: Config, store: Store, options: Options, workspace: Path) -> Session:
    """The session the options select: resumed, continued, forked or new."""
    if options.fork:
        source = store.find(workspace, options.fork)
        return Session.open(branching.fork(store, source, workspace, env.clock), env.clock)
    if options.resume:
        return Session.open(store.find(workspace, options.resume), env.clock)
    if options.continue_latest:
        latest = store.latest(workspace)
        if latest is None:
            raise UsageError("no session to continue in this workspace", hint="start one without -c/--continue")
        return Session.open(latest, env.clock)
    return _new_session(env, config, store, workspace)


def _new_session(env: Env, config: Config, store: Store, workspace: Path) -> Session:
    session_id = new_session_id(env.clock)
    facts = environment_facts(workspace, env.clock, env.environ)
    header = {
        "session_id": session_id,
        "workspace": str(workspace),
        "created": timestamp(env.clock),
        "parent_session": None,
        "model": config.model,
        "khaelor_version": __version__,
        "environment": facts,
        "system": system_text(facts, memory_files(workspace)),
    }
    return Session.create(store.new_log_path(workspace, session_id), header, env.clock)


def tool_context(session: Session, store: Store, config: Config) -> ToolContext:
    return ToolContext(
        workspace=session.workspace,
        session_id=session.id,
        tool_output_dir=store.tool_output_dir(session.id),
        process_log_dir=store.process_log_dir(session.id),
        file_state=session.state.file_state,
        record=lambda kind, fields: session.record(kind, **fields),
        bash_timeout=config.bash.timeout,
        max_inline=config.tool_output.max_inline,
    )


def policy_for(config: Config, workspace: Path, env: Env | None = None) -> Policy:
    """The session's permission policy; ConfigError names an invalid rule's file and line."""
    rules, home = config.permissions, env.environ.get("HOME") if env else None
    return Policy(config.permission_mode, workspace, list(rules.allow), list(rules.ask), list(rules.deny),
                  home=Path(home) if home else None, data_root=env.home if env else None)


@dataclass
class Runtime:
    """Everything a front end needs to run turns in one session."""

    env: Env
    config: Config
    session: Session
    agent: Agent
    recovered: list[str]

    def close(self) -> None:
        """Stop background processes, journal the clean close, release the log."""
        try:
            stop_background(self.agent.ctx)
            self.session.record("close")
        finally:
            self.session.close()


def start(env: Env, options: Options, notice: Callable[[str], None],
          ask: Callable[[Question], Answer | None] | None = None,
          on_text: Callable[[str], None] | None = None) -> Runtime:
    """Load config, open the session and build its agent.

    `ask` answers permission questions (see `Agent`); a question a dead run
    left pending is put to it again here, before anything else runs.
    """
    workspace = workspace_of(env)
    config = load_config(env, workspace, options.overrides())
    policy = policy_for(config, workspace, env)
    store = make_store(env, config)
    private_dir(store.root)
    session = open_session(env, config, store, options, workspace)
    try:
        model = options.model or session.state.model or config.model
        client = ModelClient(env.environ, RetryPolicy(config.api.max_attempts, config.api.initial_backoff,
                                                      config.api.max_backoff), config.api.timeout, notice, on_text)
        settings = Settings(model, config.max_tokens, session.state.header["system"], options.max_turns,
                            config.context.auto_compact_at,
                            None if config.max_cost is None else usd_to_nanos(config.max_cost), config.pricing)
        ctx = tool_context(session, store, config)
        agent = Agent(session, client, ctx, policy, settings, all_tools(), ask)
        agent.watchers.append(attribution.attach(session, store, env.environ))
        from khaelor.artifacts import enforce_cap_at_start  # the one clean-up hook; never raises

        enforce_cap_at_start(store, config.tool_output.cap_total, session.id, env.clock(), notice)
        interrupted = session.state.records > 0 and not session.state.closed
        recovered = session.recover(reask=agent.resume_pending)
        if interrupted:
            recovered += _pause_goal(session)
        if model != session.state.model:
            session.add_entry("model", model=model)
    except BaseException:
        session.close()
        raise
    return Runtime(env, config, session, agent, recovered)


def _pause_goal(session: Session) -> list[str]:
    """After an interrupted run an active goal waits for the person: no surprise continuation."""
    try:
        paused = goal.pause_after_interruption(session.path)
    except goal.GoalStoreError as exc:
        return [exc.message]
    return [f"{paused.describe()}"] if paused is not None and paused.state == "paused" else []


def raise_on_sigterm() -> Callable[[], None]:
    """Turn SIGTERM into `Cancelled("SIGTERM")`; returns a function restoring the old handler."""

    def handler(signum, frame):
        raise Cancelled("SIGTERM")

    previous = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)
