"""The interactive REPL: a `cmd.Cmd` whose commands are slash commands (SPEC §3).

Plain text is a request to the agent; `/name ARGS` runs `do_name`, whose
docstring is its help (first line `/name ARGS — summary`). Unique prefixes
work (`/he` → `/help`), near misses get a suggestion. We own the read loop:
an empty line does nothing, end of input leaves cleanly, Ctrl-C while typing
clears the line and Ctrl-C during a turn cancels the turn — never the REPL.

The session is opened on first need (a request, a rename), so starting and
leaving KHAELOR without asking anything leaves no empty session behind.
Everything shown about a turn is rendered from the journal's records.
"""

import cmd
import difflib
import os
import threading
from pathlib import Path

from khaelor import __version__, compaction, context, goal, ledger, metadata
from khaelor.asking import Answer, Question
from khaelor.config import TOOLS, Config, load_config
from khaelor.display import RecordView
from khaelor.env import Env
from khaelor.errors import Cancelled, KhaelorError, UsageError
from khaelor.journal import read_last_record
from khaelor.model import CREDENTIAL_HINT, credentials, MissingCredentials
from khaelor.output import Output, StreamSanitizer
from khaelor.permissions import BYPASS_BANNER
from khaelor.repl_branches import BranchCommands
from khaelor.repl_sessions import SessionCommands
from khaelor.runtime import Options, Runtime, make_store, start, workspace_of
from khaelor.status import Status, context_fraction, context_window, git_branch
from khaelor.store import workspace_key

PROMPT = "❯ "


class Repl(BranchCommands, SessionCommands, cmd.Cmd):
    """Slash commands and agent turns over one session at a time."""

    def __init__(self, env: Env, options: Options, out: Output, reader):
        super().__init__(stdout=out.stdout)
        self.env = env
        self.options = options
        self.out = out
        self.reader = reader
        self.workspace = workspace_of(env)
        self.config: Config = load_config(env, self.workspace, options.overrides())
        self.store = make_store(env, self.config)
        self.runtime: Runtime | None = None
        self._initial = _initial_command(options)
        options.resume, options.continue_latest, options.fork = None, False, None
        self.view = RecordView()
        self._stream = StreamSanitizer()
        self._streamed = False
        self._stream_lock = threading.Lock()
        self._status = ""
        self._quit = False

    # --- the loop -------------------------------------------------------------

    def run(self, first_prompt: str | None = None) -> int:
        """Banner, then read and act until end of input; returns the exit status."""
        self._banner()
        self._refresh_status()
        warming = threading.Thread(target=_warm_sdk, daemon=True)
        warming.start()
        try:
            if self._initial:
                self._command(*self._initial)
            if first_prompt:
                self.handle(first_prompt)
            while not self._quit:
                line = self._read()
                if line is None:
                    break
                self.handle(line)
        finally:
            self._detach()
            # A daemon thread killed mid-import at exit can abort the interpreter; let the import finish.
            warming.join()
        return 0

    def _read(self) -> str | None:
        while True:
            draft, self.draft = self.draft or "", None
            try:
                line = self.reader.read(PROMPT, default=draft) if draft else self.reader.read(PROMPT)
            except KeyboardInterrupt:
                continue
            if line is None:
                return None
            while line.endswith("\\"):
                more = self.reader.read("… ")
                if more is None:
                    break
                line = line[:-1] + "\n" + more
            return line

    def handle(self, line: str) -> None:
        """Act on one input: a slash command, a request, or nothing."""
        text = line.strip()
        if not text:
            return
        if text.startswith("/"):
            name, _, arg = text[1:].partition(" ")
            self._command(name, arg.strip())
        else:
            self.turn(text)
            self._pursue_goal()

    def _command(self, name: str, arg: str) -> None:
        method = self._resolve(name)
        if method is None:
            return
        try:
            method(arg)
        except KhaelorError as exc:
            self.out.error(f"error: {exc.message}")

    def _resolve(self, name: str):
        names = self.command_names()
        if name in names:
            return getattr(self, f"do_{name}")
        matches = [n for n in names if n.startswith(name)] if name else []
        if len(matches) == 1:
            return getattr(self, f"do_{matches[0]}")
        if len(matches) > 1:
            self.out.error(f"/{name} is ambiguous: " + ", ".join(f"/{m}" for m in matches))
            return None
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" — did you mean /{close[0]}?" if close else " — /help lists the commands"
        self.out.error(f"unknown command /{name}{hint}")
        return None

    def command_names(self) -> list[str]:
        return sorted(n[3:] for n in self.get_names() if n.startswith("do_"))

    # --- turns ----------------------------------------------------------------

    def turn(self, text: str, operation: str = "turn") -> bool:
        """Send a request to the agent and show what happens until it is done; True when the turn settled."""
        try:
            runtime = self._attach()
        except KhaelorError as exc:
            self.out.error(f"error: {exc.message}")
            if exc.hint:
                self.out.warn(f"hint: {exc.hint}")
            return False
        settled = False
        try:
            # /goal typed meanwhile applies at once; the watcher is joined before the goal is settled below.
            with self.reader.watch(self._goal_typed):
                outcome = runtime.agent.run(text, operation=operation)
        except (KeyboardInterrupt, Cancelled):
            self._end_stream()
            runtime.session.record("cancel", signal="SIGINT")
            self.out.message("⏹ cancelled", "yellow")
            self._set_goal_state("paused", "a turn was cancelled")
        except KhaelorError as exc:
            self._end_stream()
            runtime.session.record("error", message=exc.message)
            self.out.error(f"error: {exc.message}")
        else:
            self._end_stream()
            runtime.session.record("turn_end", stop_reason=outcome.stop_reason, is_error=outcome.is_error,
                                   turns=outcome.turns)
            if outcome.is_error:
                self.out.error(outcome.text.rsplit("\n", 1)[-1])
            else:
                settled = self._goal_after_turn(outcome.text)
        self._refresh_status()
        return settled

    def _attach(self, resume: str | None = None) -> Runtime:
        """The current runtime, or a new one: a fresh session, or the session `resume` names."""
        if self.runtime is not None and resume is None:
            return self.runtime
        if resume is None:
            credentials(self.env.environ)
        options = Options(**{**vars(self.options), "resume": resume})
        runtime = start(self.env, options, notice=self.out.warn, ask=self._ask_permission, on_text=self._on_text)
        self._detach()
        self.runtime = runtime
        runtime.session.journal.listeners.append(self._on_record)
        for note in runtime.recovered:
            self.out.warn(note)
        self._set_title()
        return runtime

    def _ask_permission(self, question: Question) -> Answer | None:
        """The permission prompt: what, why, and once / session / always / deny — deny unless told otherwise."""
        self._end_stream()
        self.out.message(f"? {question.tool} wants: {question.subject}", "yellow")
        self.out.message(f"  {question.reason}", "dim")
        choices = {"once": "[o]nce", "session": "[s]ession", "always": "[a]lways", "deny": "[D]eny"}
        if question.rules:
            self.out.message("  session/always would allow: " + ", ".join(question.rules), "dim")
        reply = self.reader.ask("  " + " · ".join(choices[s] for s in question.scopes) + " › ")
        if reply is None:
            return None
        scope = {"o": "once", "s": "session", "a": "always"}.get(reply.strip().lower()[:1], "deny")
        if scope not in question.scopes:
            scope = "deny"
        if scope == "deny":
            message = self.reader.ask("  message to the model (optional) › ")
            return Answer("deny", (message or "").strip())
        return Answer(scope)

    def _detach(self) -> None:
        if self.runtime is not None:
            runtime, self.runtime = self.runtime, None
            runtime.close()
            self.options.model = runtime.agent.settings.model

    def _on_text(self, delta: str) -> None:
        with self._stream_lock:
            self._streamed = True
            self.out.raw(self._stream.feed(delta))

    def _end_stream(self) -> None:
        """End the streamed line (also from the typeahead thread, when a /goal typed mid-turn is applied)."""
        with self._stream_lock:
            if self._streamed:
                self.out.raw(self._stream.flush() + "\n")
                self._streamed = False

    def _on_record(self, record: dict) -> None:
        if record["type"] == "entry" and record.get("kind") == "assistant":
            self._end_stream()
        for text, style in self.view.lines(record):
            self.out.message(text, style)

    # --- status, title, banner ------------------------------------------------

    def status(self) -> Status:
        runtime = self.runtime
        if runtime is None:
            return Status(self.options.model or self.config.model, None, 0, 0, git_branch(self.workspace))
        state = runtime.session.state
        model = runtime.agent.settings.model
        spent = runtime.agent.spent()
        return Status(model, context_fraction(state.last_turn_usage, model),
                      None if spent.unpriced_models else spent.total.nanos, spent.uncertain, git_branch(self.workspace),
                      self._goal_word(runtime.session.path))

    def _goal_word(self, log: Path) -> str | None:
        try:
            current = goal.load(log)
        except goal.GoalStoreError:
            return "goal n/a"
        return current.status_word() if current else None

    def toolbar(self) -> str:
        return self._status

    def _refresh_status(self) -> None:
        self._status = self.status().text()

    def _session_name(self) -> str | None:
        return metadata.load(self.runtime.session.path)["name"] if self.runtime else None

    def _set_title(self) -> None:
        name = self._session_name()
        self.out.title(f"khaelor · {name}" if name else "khaelor")

    def _banner(self) -> None:
        model = self.options.model or self.config.model
        try:
            credentials(self.env.environ)
            tail = "/help for commands, Ctrl-D to leave"
        except MissingCredentials:
            tail = f"no credentials — {CREDENTIAL_HINT}"
        self.out.message(f"khaelor {__version__} · {model} · {tail}", "dim")
        if self.config.permission_mode == "bypass":
            self.out.message(BYPASS_BANNER, "urgent")
        line = interrupted_line(self.store.latest(self.workspace), self.env.clock())
        if line:
            self.out.message(line, "dim")

    # --- commands -------------------------------------------------------------

    def do_help(self, arg: str) -> None:
        """/help [COMMAND] — list the commands, or show one command's help"""
        if arg:
            method = self._resolve(arg.lstrip("/"))
            if method is not None:
                self.out.message(method.__doc__ or "")
            return
        for name in self.command_names():
            doc = (getattr(self, f"do_{name}").__doc__ or "").split("\n", 1)[0]
            if doc.startswith(f"/{name}"):
                self.out.message(doc)

    def do_quit(self, arg: str) -> None:
        """/quit — leave KHAELOR (Ctrl-D does the same)"""
        self._quit = True

    do_exit = do_quit

    def do_new(self, arg: str) -> None:
        """/new — start a fresh session in this workspace"""
        self._detach()
        self.view = RecordView()
        self.out.message("new session (it is created with your first request)", "dim")
        self._set_title()
        self._refresh_status()

    def do_resume(self, arg: str) -> None:
        """/resume [ID] — resume the most recent session of this workspace, or the one given by id or prefix"""
        target = self.store.find(self.workspace, arg) if arg else self.store.latest(self.workspace)
        if target is None:
            raise UsageError("no session to resume in this workspace")
        if self.runtime and self.runtime.session.path == target:
            self.out.message(f"already in session {target.stem}", "dim")
            return
        runtime = self._attach(resume=target.stem)
        name = self._session_name()
        self.out.message(f"resumed {runtime.session.id}{f' ({name})' if name else ''} · "
                         f"{len(runtime.session.state.messages())} messages on this branch", "dim")
        self._refresh_status()

    def do_rename(self, arg: str) -> None:
        """/rename NAME — name the current session (alias /name)"""
        if not arg:
            raise UsageError("/rename needs a name")
        runtime = self._attach()
        tags = metadata.load(runtime.session.path)["tags"]
        metadata.save(runtime.session.path, arg, tags)
        runtime.session.record("rename", name=arg)
        self._set_title()
        self.out.message(f"session named {arg!r}", "dim")

    do_name = do_rename

    def do_tag(self, arg: str) -> None:
        """/tag TAG... — tag the current session (-TAG removes a tag)"""
        words = arg.split()
        if not words:
            raise UsageError("/tag needs at least one tag")
        runtime = self._attach()
        data = metadata.load(runtime.session.path)
        tags = [t for t in data["tags"] if f"-{t}" not in words]
        tags += [w for w in words if not w.startswith("-") and w not in tags]
        metadata.save(runtime.session.path, data["name"], tags)
        runtime.session.record("tag", tags=tags)
        self.out.message("tags: " + (", ".join(tags) or "none"), "dim")

    def do_clear(self, arg: str) -> None:
        """/clear — clear the conversation: the next request starts a new branch root (the log keeps everything)"""
        if self.runtime is None:
            self.out.message("nothing to clear", "dim")
            return
        self.runtime.session.record("head", entry=None)
        self.out.message("conversation cleared; history stays in the log", "dim")
        self._refresh_status()

    def do_model(self, arg: str) -> None:
        """/model [MODEL] — show the model, or switch to another for the following requests"""
        if not arg:
            self.out.message(self.status().model)
            return
        self.options.model = arg
        if self.runtime is not None:
            self.runtime.agent.settings.model = arg
            self.runtime.session.add_entry("model", model=arg)
        self.out.message(f"model: {arg}", "dim")
        self._refresh_status()

    def do_goal(self, arg: str) -> None:
        """/goal OBJECTIVE | status | pause | resume | clear — a durable objective KHAELOR keeps working toward

        While a goal is active, each settled turn is followed (after a short
        pause that typing or Ctrl-C cancels) by a continuation request, until
        the model says GOAL_COMPLETE or GOAL_BLOCKED: <reason>, or the goal's
        budget of continuations is spent. /goal typed while a turn runs is
        applied at once (pause stops the continuation that would follow);
        other commands typed meanwhile wait for the turn to end.
        """
        if self._change_goal(arg.strip()):
            self._pursue_goal(immediately=True)

    def _goal_typed(self, line: str) -> None:
        """A /goal line typed during a turn (on the watcher thread): applied now; the turn's end acts on it."""
        self._end_stream()
        try:
            self._change_goal(line.strip()[len("/goal"):].strip())
        except KhaelorError as exc:
            self.out.error(f"error: {exc.message}")

    def _change_goal(self, word: str) -> bool:
        """Store what `/goal WORD` asks and say so; True when a goal is now active and wants pursuing."""
        runtime = self._attach()
        log = runtime.session.path
        current = goal.load(log)
        if word in ("", "status"):
            self.out.message(current.describe() if current else "no goal set")
        elif word == "clear":
            goal.save(log, None)
            self.out.message("goal cleared", "dim")
        elif word in ("pause", "resume"):
            if current is None:
                raise UsageError("no goal set")
            current.state, current.reason = ("paused", "paused by you") if word == "pause" else ("active", "")
            if word == "resume" and current.used >= current.budget:
                current.budget = current.used + self.config.goal.budget
            goal.save(log, current)
            self.out.message(current.describe(), "dim")
        else:
            goal.save(log, goal.Goal(word, budget=self.config.goal.budget))
            self.out.message(f"goal set: {word}", "dim")
        self._refresh_status()
        return word not in ("", "status", "clear", "pause") and goal.load(log).state == "active"

    def _goal_after_turn(self, reply_text: str) -> bool:
        """Fold a settled turn into an active goal; announce it when the goal stops being active."""
        log = self.runtime.session.path
        try:
            before = goal.load(log)
            if before is None or before.state != "active":
                return True
            after = goal.after_turn(log, reply_text)
        except goal.GoalStoreError as exc:
            self.out.error(f"{exc.message}; no continuation")
            return False
        if after.state != "active":
            self.out.message(after.describe(), "green" if after.state == "complete" else "yellow")
        return True

    def _pursue_goal(self, immediately: bool = False) -> None:
        """Continue toward an active goal after each settled turn, unless the person takes over."""
        while self.runtime is not None:
            log = self.runtime.session.path
            try:
                current = goal.load(log)
            except goal.GoalStoreError as exc:
                self.out.error(f"{exc.message}; no continuation")
                return
            if current is None or current.state != "active":
                return
            if not immediately:
                typed = self._grace(self.config.goal.grace_seconds)
                if typed is not None:
                    if typed.strip():
                        self.handle(typed)
                    return
            immediately = False
            try:
                message = goal.take_continuation(log)
            except goal.GoalStoreError as exc:
                self.out.error(f"{exc.message}; no continuation")
                return
            if message is None:
                self.out.message(goal.load(log).describe(), "yellow")
                self._refresh_status()
                return
            self.out.message("↻ continuing toward the goal", "dim")
            if not self.turn(message, operation="goal"):
                return

    def _grace(self, seconds: float) -> str | None:
        """Wait before a continuation; returns what the person typed meanwhile ("" for Ctrl-C), or None."""
        try:
            return self.reader.wait_for_input(f"goal: continuing in {seconds:g}s — type to take over ", seconds)
        except KeyboardInterrupt:
            self._set_goal_state("paused", "paused with Ctrl-C")
            self.out.message("goal paused (/goal resume to continue)", "yellow")
            return ""

    def _set_goal_state(self, state: str, reason: str) -> None:
        if self.runtime is None:
            return
        log = self.runtime.session.path
        try:
            current = goal.load(log)
            if current is not None and current.state == "active":
                current.state, current.reason = state, reason
                goal.save(log, current)
        except goal.GoalStoreError as exc:
            self.out.error(exc.message)

    def do_cost(self, arg: str) -> None:
        """/cost — usage and cost of this session: totals, per model, per operation, cache hit rate"""
        if self.runtime is None:
            self.out.message("no usage yet", "dim")
            return
        for line in ledger.report(self.runtime.agent.spent()):
            self.out.message(line)

    def do_compact(self, arg: str) -> None:
        """/compact [INSTRUCTIONS] — replace the older conversation by a checkpoint now (instructions steer it)"""
        if self.runtime is None:
            self.out.message("nothing to compact yet", "dim")
            return
        try:
            self.runtime.agent.compact(arg, reason="requested")
        except (KeyboardInterrupt, Cancelled):
            self.runtime.session.record("cancel", signal="SIGINT")
            self.out.message("⏹ compaction cancelled; nothing was compacted", "yellow")
            return
        except compaction.CompactionFailed as exc:
            self.out.error(exc.message)
            return
        self.out.message("compacted: the context is now the checkpoint, its evidence and your latest request", "dim")
        self._refresh_status()

    def do_context(self, arg: str) -> None:
        """/context — the checkpoint (if any) and where the context window goes, counted by the API"""
        runtime = self._attach()
        agent, state = runtime.agent, runtime.session.state
        live = state.live_entries()
        checkpoint = live[0]["message"] if live and live[0].get("kind") == "compaction" else None
        if checkpoint:
            self.out.message(checkpoint["content"][0]["text"])
        model = agent.settings.model
        rows = context.budget(agent.client, model, agent.settings.system, agent.definitions, state.messages(),
                              checkpoint)
        for line in context.render(rows, context_window(model)):
            self.out.message(line)

    def do_export(self, arg: str) -> None:
        """/export [PATH] — export this session, redacted: HTML by default, .json/.jsonl paths select data formats"""
        from khaelor.export import default_output, export_session, format_for_path

        runtime = self._require_session()
        path = Path(arg).expanduser() if arg else None
        if path is not None and not path.is_absolute():
            path = self.workspace / path
        fmt = format_for_path(path) if path else "html"
        report = export_session(runtime.session.path, path or default_output(runtime.session.id, fmt, self.workspace),
                                fmt)
        for line in report.lines():
            self.out.message(line)

    def do_import(self, arg: str) -> None:
        """/import PATH — import a KHAELOR export or log, or a pi session, as a new session (asks before switching)"""
        from khaelor.importer import import_session

        if not arg:
            raise UsageError("/import needs the path of a session file")
        path = Path(arg).expanduser()
        report = import_session(path if path.is_absolute() else self.workspace / path, self.store, self.workspace,
                                self.env)
        for line in report.lines():
            self.out.message(line)
        answer = self.reader.ask(f"switch to the imported session {report.session_id}? [y/N] ")
        if (answer or "").strip().lower() in ("y", "yes"):
            self.do_resume(report.session_id)

    def do_share(self, arg: str) -> None:
        """/share — publish a redacted snapshot as an unlisted gist with your gh, after you approve the preview"""
        from khaelor.share import prepare_share, publish_share

        runtime = self._require_session()
        preview = prepare_share(runtime.session.path, self.env.home, self.env.clock)
        for line in preview.lines():
            self.out.message(line)
        answer = self.reader.ask("publish exactly this file as an unlisted (not private) gist? [y/N] ")
        if (answer or "").strip().lower() not in ("y", "yes"):
            self.out.message("not published", "dim")
            return
        for line in publish_share(preview, self.env.environ).lines():
            self.out.message(line)

    def _require_session(self) -> Runtime:
        if self.runtime is None:
            raise UsageError("no session yet: make a request or /resume one first")
        return self.runtime

    def do_permissions(self, arg: str) -> None:
        """/permissions [allow RULE | remove RULE] — show the mode and rules with their sources; add or remove a session rule"""
        action, _, rule = arg.strip().partition(" ")
        if action in ("allow", "remove"):
            self._session_rule(action, rule.strip())
            return
        if action:
            raise UsageError("/permissions takes 'allow RULE' or 'remove RULE'")
        policy = self.runtime.agent.policy if self.runtime else None
        self.out.message(f"mode: {policy.mode if policy else self.config.permission_mode}")
        rules = self.config.permissions
        for kind in ("deny", "ask", "allow"):
            for rule in getattr(rules, kind):
                text = f"{rule.tool}: {rule.pattern}" if rule.pattern else rule.tool
                self.out.message(f"  {kind:5}  {text}  ({rule.source}{' ' + rule.origin if rule.origin else ''})")
        for grant in self.runtime.session.state.grants if self.runtime else ():
            self.out.message(f"  allow  {grant}  (session)")

    def _session_rule(self, action: str, rule: str) -> None:
        runtime = self._attach()
        tool = rule.partition(":")[0].strip()
        if action == "allow" and (tool not in TOOLS or runtime.agent.policy.compile_grant(rule) is None):
            raise UsageError(f"not a valid rule: {rule!r} (e.g. 'bash: npm test', 'edit: src/**', 'read')")
        if action == "remove" and rule not in runtime.session.state.grants:
            raise UsageError(f"{rule!r} is not a session rule; /permissions lists them")
        runtime.session.record("session_rule", action="remove" if action == "remove" else "add", rule=rule)
        self.out.message(f"session rule {'removed' if action == 'remove' else 'added'}: allow {rule}", "dim")

    def do_processes(self, arg: str) -> None:
        """/processes [log ID | stop ID] — list background processes, show one's log tail, or stop one"""
        if self.runtime is None:
            self.out.message("no background processes", "dim")
            return
        from khaelor.tools.process import PROCESS

        action, _, proc_id = arg.partition(" ")
        request = {"action": action or "list"}
        if proc_id:
            request["id"] = proc_id.strip()
        try:
            self.out.message(PROCESS.run(self.runtime.agent.ctx, request))
        except Exception as exc:
            self.out.error(f"error: {exc}")

    def do_diff(self, arg: str) -> None:
        """/diff [PATH] [--stat] — what the agent changed in this session, file by file (not your own edits)

        The net change to every file the agent created, edited, deleted or
        renamed — through any tool, bash included — from the content before
        it first touched the file. Work that was there before the session and
        edits made outside the agent's tool calls are left out; files someone
        else also edited are flagged. PATH limits it to a file or folder;
        --stat lists the files without the diffs.
        """
        from khaelor.diffview import session_lines

        for text, style in session_lines(self.runtime, arg):
            self.out.message(text, style)

    # --- completion -----------------------------------------------------------

    def words(self, text: str) -> list[str]:
        """Completion candidates for the input so far."""
        if text.startswith("/") and " " not in text:
            return [f"/{name}" for name in self.command_names()]
        if text.startswith("/resume "):
            return [log.stem for log in self.store.sessions_of(self.workspace)]
        return _paths(self.workspace, text.split(" ")[-1])


def _paths(workspace: Path, prefix: str) -> list[str]:
    folder, _, start = prefix.rpartition("/")
    base = workspace / folder if folder else workspace
    try:
        names = sorted(os.listdir(base))[:500]
    except OSError:
        return []
    joined = f"{folder}/" if folder else ""
    return [joined + n + ("/" if (base / n).is_dir() else "") for n in names if n.startswith(start)]


def _initial_command(options: Options) -> tuple[str, str] | None:
    """`-r ID` and `-c` resume at once, `--fork ID` forks at once; `-r` or `--fork` alone opens the picker."""
    if options.fork is not None:
        return ("fork", options.fork)
    if options.resume == "":
        return ("sessions", "")
    if options.resume:
        return ("resume", options.resume)
    return ("resume", "") if options.continue_latest else None


def _warm_sdk() -> None:
    """Import the SDK while the person types, so the first request does not wait for it."""
    try:
        import anthropic  # noqa: F401
    except Exception:
        pass


def _epoch(stamp: str | None) -> float:
    import datetime

    if not stamp:
        return 0.0
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def relative_age(seconds: float) -> str:
    """'12 min ago' style ages."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"


def interrupted_line(latest: Path | None, now: float) -> str | None:
    """The quiet startup line for a latest session that did not close cleanly."""
    if latest is None:
        return None
    last = read_last_record(latest)
    if last is None or last.get("type") == "close":
        return None
    return f"Interrupted session from {relative_age(now - _epoch(last.get('ts')))} · /resume to continue"


def history_path(env: Env, workspace: Path) -> Path:
    return env.home / "history" / workspace_key(workspace)


def run(env: Env, options: Options, first_prompt: str | None) -> int:
    """Start the REPL on this process's terminal (or plain lines when there is none)."""
    from khaelor.output import wants_color
    from khaelor.reader import PlainReader, ToolkitReader

    out = Output(env.stdout, env.stderr, wants_color(env.stdout, env.environ))
    interactive = env.stdin_is_tty() and env.stdout_is_tty() and env.environ.get("TERM") != "dumb"
    reader = PlainReader(env.stdin, echo=None)
    repl = Repl(env, options, out, reader)
    if interactive:
        repl.reader = ToolkitReader(history_path(env, repl.workspace), repl.words, repl.toolbar)
    return repl.run(first_prompt)
