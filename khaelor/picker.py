"""The inline session picker: a list under the prompt, not a full screen (SPEC §3 `/sessions`, §10).

Keys: ↑↓ select · Enter resume (or fork, when picking the session to fork) ·
n new · / filter · Tab this workspace / all workspaces · Ctrl-S sort (recent,
title, message count) · Ctrl-N named only · Ctrl-P workspace paths · Ctrl-R
or r rename · Ctrl-X, Delete or x trash · Esc leave (or leave the line being
typed).

`PickerState` is the pure part, tested without a terminal: which sessions
are shown and in what order, the selection, the line being typed (a filter,
a new name, a trash confirmation) and the outcome. Sessions are catalog
`Summary`s from an injected loader, called once per scope on first need; the
filter is the query language of `sessions list --query` (`listing.parse_query`
and `listing.matches`). The state never writes anything: a confirmed rename or
trash ends the run with a `Choice`, which the caller carries out before it
opens the picker again on the same state (`reload()`). The current session is
never offered for the trash. `pick()` runs the state as a small prompt_toolkit
application that draws below the prompt and erases itself when done.
"""

import os
from dataclasses import dataclass, field
from typing import Callable

from khaelor import listing
from khaelor.catalog import Summary
from khaelor.errors import UsageError
from khaelor.output import sanitize

VISIBLE = 12
SORTS = ("recent", "title", "messages")
SORT_NAMES = {"recent": "recent", "title": "title", "messages": "message count"}
PLACE_WIDTH = 40
ASKING = ("rename", "trash")


@dataclass(frozen=True)
class Choice:
    """How a picker run ended: what to do, and to which session."""

    action: str
    """The enter action ('resume' or 'fork'), 'new', 'rename' or 'trash'."""
    session_id: str | None = None
    path: str | None = None
    """The session's log."""
    name: str | None = None
    """The new name, for 'rename'."""


@dataclass
class PickerState:
    """What one picker shows, the line being typed, and how the run ended."""

    load: Callable[[bool], list[Summary]]
    """The sessions of this workspace (False) or of every workspace (True)."""
    now: float
    current: str | None = None
    """The id of the session the REPL is in: marked, and never trashed."""
    enter_action: str = "resume"
    everywhere: bool = False
    sort: str = "recent"
    named_only: bool = False
    paths: bool = False
    query: str = ""
    query_error: str = ""
    mode: str = "list"
    """'list', 'filter' (typing the query), 'rename' (typing the name) or 'trash' (confirming)."""
    draft: str = ""
    message: str = ""
    index: int = 0
    done: bool = False
    result: Choice | None = None
    shown: list[Summary] = field(default_factory=list)
    _loaded: dict[bool, list[Summary]] = field(default_factory=dict, repr=False)
    _query: listing.Query | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.refresh()

    # --- what is shown -------------------------------------------------------

    def sessions(self) -> list[Summary]:
        """Every session of the current scope, loaded on first need."""
        if self.everywhere not in self._loaded:
            self._loaded[self.everywhere] = self.load(self.everywhere)
        return self._loaded[self.everywhere]

    def selected(self) -> Summary | None:
        return self.shown[self.index] if self.shown else None

    def refresh(self, keep: bool = True) -> None:
        """Filter and sort again; the selected session stays selected while it is shown (with `keep`)."""
        try:
            self._query, self.query_error = listing.parse_query(self.query) if self.query else None, ""
        except UsageError as exc:
            # Half-typed ('"the par', 're:(') keeps the last complete query.
            self.query_error = exc.message.split(" in --query")[0]
        before, query = self.selected(), self._query
        found = [s for s in self.sessions() if (s.name or not self.named_only)
                 and (query is None or listing.matches(query, s))]
        self.shown = _sorted(found, self.sort)
        ids = [s.id for s in self.shown]
        self.index = ids.index(before.id) if keep and before is not None and before.id in ids else 0

    def reload(self) -> None:
        """Read the sessions again (after a rename or trash) and go on browsing."""
        self._loaded.clear()
        self.done, self.result, self.mode, self.draft = False, None, "list", ""
        self.refresh()

    # --- keys ----------------------------------------------------------------

    def press(self, key: str) -> None:
        """Act on a key named as prompt_toolkit names it ('tab', 'c-s', 'delete', 'enter', 'escape', …)."""
        self.message = ""
        action = (_ASKING_KEYS if self.mode in ASKING else _LIST_KEYS).get(key)
        if action is not None:
            action(self)

    def type(self, text: str) -> None:
        """Typed text: the filter or the new name while one is typed; otherwise `/`, `n`, `r` and `x`."""
        self.message = ""
        text = "".join(ch for ch in text if ch.isprintable())
        if self.mode == "filter":
            self.query += text
            self.refresh(keep=False)
        elif self.mode == "rename":
            self.draft += text
        elif self.mode == "list" and text in _LETTERS:
            _LETTERS[text](self)

    def move(self, delta: int) -> None:
        if self.shown:
            self.index = max(0, min(len(self.shown) - 1, self.index + delta))

    def toggle_scope(self) -> None:
        self.everywhere = not self.everywhere
        self.refresh()

    def cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.refresh()

    def toggle_named(self) -> None:
        self.named_only = not self.named_only
        self.refresh()

    def toggle_paths(self) -> None:
        self.paths = not self.paths

    def start_filter(self) -> None:
        self.mode = "filter"

    def start_rename(self) -> None:
        if self._need_selection():
            self.mode, self.draft = "rename", ""

    def start_trash(self) -> None:
        if not self._need_selection():
            return
        if self.selected().id == self.current:
            self.message = "the current session cannot be trashed (/new first)"
            return
        self.mode = "trash"

    def enter(self) -> None:
        self._finish(self.enter_action)

    def new(self) -> None:
        """`n`: a fresh session instead (only where Enter resumes)."""
        if self.enter_action == "resume":
            self.done, self.result = True, Choice("new")

    def confirm(self) -> None:
        """Enter on the rename or trash line."""
        if self.mode == "trash":
            self._finish("trash")
            return
        name = " ".join(self.draft.split())
        if not name:
            self.message = "a name cannot be empty (Esc cancels)"
            return
        self._finish("rename", name)

    def back(self) -> None:
        """Esc on the rename or trash line: nothing happens."""
        self.message = "not renamed" if self.mode == "rename" else "not trashed"
        self.mode, self.draft = "list", ""

    def backspace(self) -> None:
        if self.mode == "filter":
            self.query = self.query[:-1]
            self.refresh(keep=False)
        elif self.mode == "rename":
            self.draft = self.draft[:-1]

    def escape(self) -> None:
        if self.mode == "filter":
            self.mode = "list"
        else:
            self.cancel()

    def cancel(self) -> None:
        self.done, self.result = True, None

    def _need_selection(self) -> bool:
        if self.selected() is None:
            self.message = "no session selected"
        return self.selected() is not None

    def _finish(self, action: str, name: str | None = None) -> None:
        if self._need_selection():
            summary = self.selected()
            self.done, self.result = True, Choice(action, summary.id, summary.path, name)

    # --- drawing -------------------------------------------------------------

    def lines(self, width: int = 100) -> list[tuple[str, str]]:
        """(style, text) rows to draw, each at most `width` columns."""
        rows = [("bold", self._header())]
        start = max(0, min(self.index - VISIBLE // 2, len(self.shown) - VISIBLE))
        visible = self.shown[start:start + VISIBLE]
        places = max((len(self._place(summary)) for summary in visible), default=0)
        for offset, summary in enumerate(visible):
            here = start + offset == self.index
            rows.append(("reverse" if here else "", ("❯ " if here else "  ") + self.row(summary, width - 3 - places)))
        if not self.shown:
            rows.append(("", "  " + self._empty()))
        if self.message:
            rows.append(("bold", self.message))
        rows += [("italic", hint) for hint in self._hints()]
        return [(style, _fit(text, width - 1)) for style, text in rows]

    def label(self, summary: Summary) -> str:
        """Name — title #tags, as `sessions list` shows them; '(current)' for the REPL's session."""
        if summary.error:
            return f"damaged: {summary.error}"
        text = summary.title or "(no request yet)"
        text = f"{summary.name} — {text}" if summary.name else text
        text += "".join(f" #{tag}" for tag in summary.tags)
        return text + (" (current)" if summary.id == self.current else "")

    def row(self, summary: Summary, width: int) -> str:
        """One session: label, relative age, message count, real cost (then its workspace, when asked for)."""
        age, cost = listing.age(summary.updated, self.now), listing.money(summary)
        meta = f"  {age:>9}  {summary.messages:>4} msgs  {cost:>10}"
        room = max(12, width - len(meta))
        return _fit(sanitize(self.label(summary)), room).ljust(room) + meta + self._place(summary)

    def _place(self, summary: Summary) -> str:
        workspace = summary.workspace or "?"
        if self.paths:
            return "  " + sanitize(workspace if len(workspace) <= PLACE_WIDTH else "…" + workspace[1 - PLACE_WIDTH:])
        return f"  [{sanitize(os.path.basename(workspace.rstrip('/')) or workspace)}]" if self.everywhere else ""

    def _header(self) -> str:
        parts = ["all workspaces" if self.everywhere else "this workspace",
                 f"{len(self.shown)} of {len(self.sessions())} sessions", f"sorted by {SORT_NAMES[self.sort]}"]
        if self.named_only:
            parts.append("named only")
        if self.query and self.mode != "filter":
            parts.append(f"filter: {self.query}")
        return sanitize(" · ".join(parts))

    def _empty(self) -> str:
        if self.sessions():
            return "(no session matches)"
        return "(no sessions in any workspace)" if self.everywhere else "(no sessions in this workspace · Tab: all)"

    def _hints(self) -> list[str]:
        summary = self.selected()
        about = sanitize(f"{self.label(summary)} ({summary.id})") if summary else ""
        if self.mode == "trash":
            return [f"trash {about}? Enter confirms · Esc cancels"]
        if self.mode == "rename":
            return [f"new name for {about}: {self.draft}▏", "Enter confirms · Esc cancels"]
        first = f"↑↓ Enter {self.enter_action}" + (" · n new" if self.enter_action == "resume" else "")
        first += " · / filter · Ctrl-R rename · Ctrl-X trash · Esc leave"
        second = (f"Tab {'this workspace' if self.everywhere else 'all workspaces'} · Ctrl-S sort · "
                  f"Ctrl-N {'all' if self.named_only else 'named only'} · Ctrl-P {'no ' if self.paths else ''}paths")
        if self.mode == "filter":
            problem = f"  ({self.query_error})" if self.query_error else ""
            return [f'filter: {self.query}▏{problem}  words · "exact phrase" · re:regex · Esc done', first, second]
        return [first, second]


_LIST_KEYS: dict[str, Callable[[PickerState], None]] = {
    "up": lambda state: state.move(-1), "down": lambda state: state.move(1),
    "pageup": lambda state: state.move(-VISIBLE), "pagedown": lambda state: state.move(VISIBLE),
    "enter": PickerState.enter, "escape": PickerState.escape, "c-c": PickerState.cancel,
    "backspace": PickerState.backspace, "tab": PickerState.toggle_scope, "c-s": PickerState.cycle_sort,
    "c-n": PickerState.toggle_named, "c-p": PickerState.toggle_paths, "c-r": PickerState.start_rename,
    "c-x": PickerState.start_trash, "delete": PickerState.start_trash,
}
_ASKING_KEYS: dict[str, Callable[[PickerState], None]] = {
    "enter": PickerState.confirm, "escape": PickerState.back, "backspace": PickerState.backspace,
    "c-c": PickerState.cancel,
}
_LETTERS: dict[str, Callable[[PickerState], None]] = {
    "/": PickerState.start_filter, "n": PickerState.new, "r": PickerState.start_rename, "x": PickerState.start_trash,
}
KEYS = tuple(dict.fromkeys([*_LIST_KEYS, *_ASKING_KEYS]))


def _sorted(found: list[Summary], sort: str) -> list[Summary]:
    """Recent first; by label (untitled last); or most messages first, recent first among equals."""
    recent = sorted(found, key=lambda s: (s.updated or "", s.id), reverse=True)
    if sort == "title":
        return sorted(found, key=lambda s: (not (s.name or s.title), (s.name or s.title).casefold(), s.id))
    if sort == "messages":
        return sorted(recent, key=lambda s: -s.messages)
    return recent


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def pick(state: PickerState, pt_input=None, pt_output=None) -> Choice | None:
    """Run the picker inline until it ends; its `Choice`, or None (Esc, Ctrl-C, end of input)."""
    from prompt_toolkit.application import Application, get_app
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.layout import FormattedTextControl, Layout, Window

    def draw():
        width = get_app().output.get_size().columns
        return [(style, text + "\n") for style, text in state.lines(width)]

    keys = KeyBindings()
    for name in KEYS:
        # Eager: Escape and Ctrl-X also begin longer sequences, which would otherwise wait for a timeout.
        keys.add(name, eager=True)(lambda event, name=name: _then_exit(event, state, state.press, name))
    keys.add("<any>")(lambda event: _then_exit(event, state, state.type, event.data))
    app = Application(layout=Layout(Window(FormattedTextControl(draw), dont_extend_height=True)),
                      key_bindings=keys, full_screen=False, input=pt_input, output=pt_output, erase_when_done=True)
    try:
        app.run()
    except EOFError:
        state.cancel()
    return state.result


def _then_exit(event, state: PickerState, action: Callable[[str], None], argument: str) -> None:
    action(argument)
    if state.done:
        event.app.exit()
