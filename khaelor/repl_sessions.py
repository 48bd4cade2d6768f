"""The REPL's session browsing: `/sessions` and the picker that also chooses a session to fork (SPEC §3, §10).

`SessionCommands` is mixed into `Repl`, whose `env`, `store`, `workspace`,
`config`, `reader`, `out`, `runtime`, `do_new`, `do_resume` and `do_rename`
it uses. Sessions come from the catalog (`catalog.summaries`), as in
`khaelor sessions list`, so both scopes stay fast with thousands of logs.

On a terminal the reader's `pick` runs the inline picker (`khaelor.picker`);
a rename or trash it asks for is carried out here and the picker opens again
where it was. The current session is never trashed. Without a terminal (a
reader with no `pick`) the sessions are printed, newest first, one per line.
"""

from pathlib import Path

from khaelor import catalog, listing, metadata
from khaelor.catalog import Summary
from khaelor.errors import JournalError, KhaelorError
from khaelor.journal import Journal, exclusive
from khaelor.picker import Choice, PickerState


class SessionCommands:
    """`/sessions`, `choose_session` and what the picker's choices do."""

    def do_sessions(self, arg: str) -> None:
        """/sessions — browse sessions: Enter resume, n new, / filter, Ctrl-R rename, Ctrl-X trash, Tab all workspaces

        Tab switches between this workspace and all workspaces; Ctrl-S sorts
        by recent use, title or message count; Ctrl-N shows only named
        sessions; Ctrl-P shows each session's workspace path. The filter
        (after /) searches ids, names, titles, tags, paths and dates: words,
        "a quoted phrase" (exact) or re:REGEX. Ctrl-R or r renames the
        selected session; Ctrl-X, Delete or x moves it to the trash after
        naming it (Enter confirms, Esc cancels) — never the current session.
        Without a terminal the sessions of this workspace are listed.
        """
        choice = self._choose("resume")
        if choice is None:
            return
        if choice.action == "new":
            self.do_new("")
        else:
            self.do_resume(choice.session_id)

    def choose_session(self, enter_action: str = "fork") -> str | None:
        """The id of the session picked with Enter (labelled `enter_action`), or None.

        None when the picker is left (Esc, Ctrl-C, end of input), when there
        are no sessions, and without a terminal (the sessions are listed
        instead). Renames and trashing inside the picker are carried out here.
        """
        choice = self._choose(enter_action)
        return choice.session_id if choice is not None and choice.action == enter_action else None

    def _choose(self, enter_action: str) -> Choice | None:
        """Run the picker until it ends with Enter, `n` or nothing, doing its renames and trashing on the way."""
        if not hasattr(self.reader, "pick"):
            self._print_sessions()
            return None
        state = PickerState(self._summaries, self.env.clock(), self._current_id(), enter_action)
        if not state.sessions() and not self.store.all_sessions():
            self.out.message("no sessions yet", "dim")
            return None
        while True:
            choice = self.reader.pick(state)
            if choice is None or choice.action not in ("rename", "trash"):
                return choice
            self._picked(choice)
            state.current = self._current_id()
            state.reload()

    def _summaries(self, everywhere: bool) -> list[Summary]:
        """The catalog's summaries of this workspace's sessions, or of every workspace's."""
        if everywhere:
            logs, scope = self.store.all_sessions(), None
        else:
            logs, scope = self.store.sessions_of(self.workspace), [self.store.workspace_dir(self.workspace)]
        return catalog.summaries(self.store.root, logs, scope, self.config.pricing).sessions

    def _print_sessions(self) -> None:
        found = sorted(self._summaries(False), key=lambda s: (s.updated or "", s.id), reverse=True)
        if not found:
            self.out.message("no sessions in this workspace yet", "dim")
        now = self.env.clock()
        for summary in found:
            self.out.message("  " + listing.line(summary, now))

    def _current_id(self) -> str | None:
        return self.runtime.session.path.stem if self.runtime else None

    def _picked(self, choice: Choice) -> None:
        """Carry out a rename or trash the picker asked for; a failure is reported and browsing goes on."""
        try:
            if choice.action == "rename":
                self._rename(Path(choice.path), choice.name)
            else:
                self._trash(Path(choice.path))
        except KhaelorError as exc:
            self.out.error(f"error: {exc.message}")

    def _rename(self, log: Path, name: str) -> None:
        if self.runtime and self.runtime.session.path == log:
            self.do_rename(name)
            return
        metadata.save(log, name, metadata.load(log)["tags"])
        self.out.message(f"{log.stem} named {name!r}{_journal_rename(log, name, self.env.clock)}", "dim")

    def _trash(self, log: Path) -> None:
        if self.runtime and self.runtime.session.path == log:
            self.out.error("the current session cannot be trashed; /new first")
            return
        with exclusive(log):
            self.store.trash(log)
        self.out.message(f"{log.stem} moved to the trash (khaelor sessions restore {log.stem} brings it back)", "dim")


def _journal_rename(log: Path, name: str, clock) -> str:
    """Journal the rename as an audit record when the log's lock is free; '' or why it was not journaled."""
    try:
        journal, _ = Journal.open(log, clock)
    except JournalError as exc:
        return f" (sidecar only, not journaled: {exc.message})"
    try:
        journal.append("rename", name=name)
    finally:
        journal.close()
    return ""
