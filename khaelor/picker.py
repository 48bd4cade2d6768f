"""The inline session picker of `/sessions`: a list under the prompt, not a full screen.

↑↓ select · Enter resume · n new · r rename · x delete (asks first) · / filter
· Esc leave. `PickerState` is the pure part (selection, filter, the chosen
action) and is tested without a terminal; `pick()` runs it as a small
prompt_toolkit application that draws below the prompt and leaves the
scrollback alone.
"""

from dataclasses import dataclass, field

VISIBLE = 12


@dataclass(frozen=True)
class Item:
    """One session as the picker shows it."""

    session_id: str
    label: str
    detail: str


@dataclass
class PickerState:
    """Selection, filter and outcome of one picker run."""

    items: list[Item]
    index: int = 0
    query: str = ""
    filtering: bool = False
    result: tuple[str, str | None] | None = None
    shown: list[Item] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.shown = list(self.items)

    def move(self, delta: int) -> None:
        if self.shown:
            self.index = max(0, min(len(self.shown) - 1, self.index + delta))

    def type(self, text: str) -> None:
        self.query += text
        self._refilter()

    def backspace(self) -> None:
        self.query = self.query[:-1]
        self._refilter()

    def _refilter(self) -> None:
        words = self.query.lower().split()
        self.shown = [i for i in self.items if all(w in f"{i.session_id} {i.label} {i.detail}".lower() for w in words)]
        self.index = 0

    def choose(self, action: str) -> None:
        """End the picker with `action` on the selected session ('new' needs none)."""
        selected = self.shown[self.index].session_id if self.shown else None
        if action != "new" and selected is None:
            return
        self.result = (action, selected if action != "new" else None)

    def lines(self) -> list[tuple[str, str]]:
        """(style, text) rows to draw."""
        start = max(0, min(self.index - VISIBLE // 2, len(self.shown) - VISIBLE))
        rows = []
        for offset, item in enumerate(self.shown[start:start + VISIBLE]):
            mark = "❯ " if start + offset == self.index else "  "
            style = "reverse" if start + offset == self.index else ""
            rows.append((style, f"{mark}{item.label[:60]:<60}  {item.detail}"))
        if not self.shown:
            rows.append(("", "  (no session matches)"))
        hint = f"filter: {self.query}▏" if self.filtering else "↑↓ select · Enter resume · n new · r rename · x delete · / filter · Esc"
        rows.append(("italic", hint))
        return rows


def pick(state: PickerState, pt_input=None, pt_output=None) -> tuple[str, str | None] | None:
    """Run the picker inline; returns the chosen (action, session id) or None."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.layout import FormattedTextControl, Layout, Window

    def draw():
        return [(style, text + "\n") for style, text in state.lines()]

    keys = KeyBindings()

    def finish(event, action: str) -> None:
        state.choose(action)
        if state.result is not None:
            event.app.exit(result=state.result)

    keys.add("up")(lambda e: state.move(-1))
    keys.add("down")(lambda e: state.move(1))
    keys.add("enter")(lambda e: finish(e, "resume"))
    keys.add("escape", eager=True)(lambda e: _escape(e, state))
    keys.add("c-c")(lambda e: e.app.exit(result=None))
    keys.add("backspace")(lambda e: state.backspace() if state.filtering else None)

    @keys.add("<any>")
    def _letter(event):
        char = event.data
        if state.filtering:
            state.type(char)
        elif char == "/":
            state.filtering = True
        elif char in {"n": "new", "r": "rename", "x": "delete"}:
            finish(event, {"n": "new", "r": "rename", "x": "delete"}[char])

    app = Application(layout=Layout(Window(FormattedTextControl(draw), dont_extend_height=True)),
                      key_bindings=keys, full_screen=False, input=pt_input, output=pt_output, erase_when_done=True)
    return app.run()


def _escape(event, state: PickerState) -> None:
    if state.filtering:
        state.filtering = False
        return
    event.app.exit(result=None)
