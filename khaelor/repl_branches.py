"""The REPL's branch commands: /tree, /fork and /clone (SPEC §3, §10).

A mixin of `Repl`: it uses the REPL's runtime, store, reader and output. The
tree logic, head moves, summaries and new logs are `khaelor.branching`'s;
this module only asks the person and reports.
"""

from khaelor import branching
from khaelor.errors import Cancelled, KhaelorError, UsageError


class BranchCommands:
    """/tree, /fork and /clone."""

    draft: str | None = None
    """Text handed back to the next prompt for editing (a request chosen in /tree)."""

    def do_tree(self, arg: str) -> None:
        """/tree [ENTRY] — show the branch tree and move the head to a chosen entry

        Every entry of this session, one per line, indented at each fork; ●
        marks the head, "(abandoned)" the ends of branches left behind.
        Choosing an entry (↑↓ and Enter on a terminal, or its id) makes it the
        head: the next request continues from there, and the log keeps the
        other branches. Choosing one of your requests goes back to just before
        it and puts its text in the input to edit instead of sending it again.
        When the move leaves part of the active branch behind you can have it
        summarized into the conversation: none, a normal summary, or one with
        your instructions. A cancelled or failed summary leaves the head where
        it was.
        """
        runtime = self._require_session()
        state = runtime.session.state
        nodes = branching.tree(state)
        if not nodes:
            self.out.message("no conversation yet", "dim")
            return
        chosen = arg.strip() or self._choose_entry(nodes)
        if not chosen:
            return
        move = branching.plan_move(state, self._entry_id(state, chosen))
        summary = self._branch_summary(move)
        if summary is None:
            return
        summary, instructions = summary
        left = state.head
        runtime.session.record("head", entry=move.target)
        if summary:
            runtime.session.add_entry("branch_summary", branching.summary_message(summary),
                                      summary_of={"left": left, "entries": [e["id"] for e in move.abandoned]},
                                      instructions=instructions)
        where = branching.label(state.entries[move.target]) if move.target else "the start (empty conversation)"
        self.out.message(f"head moved to {where}" + (" · the left branch is summarized" if summary else ""), "dim")
        if move.draft is not None:
            self.draft = move.draft
            self.out.message("your request is back in the input, to edit and send:", "dim")
            self.out.message(move.draft)
        self._refresh_status()

    def _choose_entry(self, nodes: list[branching.Node]) -> str | None:
        if hasattr(self.reader, "choose_entry"):
            return self.reader.choose_entry(nodes)
        for node in nodes:
            self.out.message(f"  {node.entry_id}  {node.text()}", "bold" if node.is_head else None)
        answer = self.reader.ask("move the head to (entry id; Enter keeps it) › ")
        return (answer or "").strip() or None

    @staticmethod
    def _entry_id(state, text: str) -> str:
        """The entry `text` names, exactly or by a unique prefix."""
        if text in state.entries:
            return text
        found = [entry_id for entry_id in state.entries if entry_id.startswith(text)]
        if len(found) != 1:
            raise UsageError(f"{'no' if not found else 'more than one'} entry starts with {text!r}; /tree lists them")
        return found[0]

    def _branch_summary(self, move: branching.Move) -> tuple[str, str] | None:
        """(summary, instructions) for the span the move leaves — "" for none; None when the move is off."""
        if not any(entry.get("message") for entry in move.abandoned):
            return "", ""
        count = len(move.abandoned)
        choice = self.reader.ask(f"summarize the {count} entr{'y' if count == 1 else 'ies'} you leave? "
                                 "[N]one · [s]ummary · [c]ustom instructions › ")
        if choice is None:
            self.out.message("head not moved", "dim")
            return None
        word = choice.strip().lower()[:1]
        if word not in ("s", "c"):
            return "", ""
        instructions = ""
        if word == "c":
            instructions = (self.reader.ask("instructions for the summary › ") or "").strip()
        self.out.message("summarizing the branch you leave…", "dim")
        try:
            text = self.runtime.agent.aside(branching.summary_request(move.abandoned, instructions), "branch_summary")
        except (KeyboardInterrupt, Cancelled):
            self._end_stream()
            self.runtime.session.record("cancel", signal="SIGINT")
            self.out.message("⏹ summary cancelled; the head stays where it was", "yellow")
            return None
        except KhaelorError as exc:
            self._end_stream()
            self.out.error(f"the summary failed ({exc.message}); the head stays where it was")
            return None
        self._end_stream()
        if not text.strip():
            self.out.error("the summary came back empty; the head stays where it was")
            return None
        return text, instructions

    def do_fork(self, arg: str) -> None:
        """/fork [ID] — a new session from the head of this session (or of session ID, or one you pick); you continue in it"""
        if arg:
            source = self.store.find(self.workspace, arg)
        elif self.runtime is not None:
            source = self.runtime.session.path
        else:
            chosen = self.choose_session("fork")
            if chosen is None:
                if not hasattr(self.reader, "pick"):
                    self.out.message("/fork ID forks one of these", "dim")
                return
            source = self.store.find(self.workspace, chosen)
        self._switch_to(branching.fork(self.store, source, self.workspace, self.env.clock), "forked", source)

    def do_clone(self, arg: str) -> None:
        """/clone [ID] — a new session with every branch of this session (or of session ID); you continue in it"""
        source = self.store.find(self.workspace, arg) if arg else self._require_session().session.path
        self._switch_to(branching.clone(self.store, source, self.workspace, self.env.clock), "cloned", source)

    def _switch_to(self, log, verb: str, source) -> None:
        runtime = self._attach(resume=log.stem)
        count = len(runtime.session.state.messages())
        self.out.message(f"{verb} {source.stem} → {log.stem} ({count} messages on its branch); "
                         "you are in the new session, the original is unchanged", "dim")
        self._refresh_status()
