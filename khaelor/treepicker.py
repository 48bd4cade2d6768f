"""The inline chooser of `/tree`: the session's entries under the prompt, the head preselected.

↑↓ move · PgUp/PgDn a page · Home/End · Enter choose · Esc leave. `TreeChooser`
is the pure part (tested without a terminal); `choose()` runs it as a small
prompt_toolkit application that draws below the prompt and erases itself.
"""

from dataclasses import dataclass

from khaelor.branching import Node

VISIBLE = 14
HINT = "↑↓ move · PgUp/PgDn page · Enter move the head here · Esc leave"


@dataclass
class TreeChooser:
    """Which row is selected among the tree's nodes."""

    nodes: list[Node]
    index: int = 0

    def __post_init__(self) -> None:
        heads = [i for i, node in enumerate(self.nodes) if node.is_head]
        self.index = heads[0] if heads else max(0, len(self.nodes) - 1)

    def move(self, delta: int) -> None:
        if self.nodes:
            self.index = max(0, min(len(self.nodes) - 1, self.index + delta))

    def selected(self) -> str | None:
        return self.nodes[self.index].entry_id if self.nodes else None

    def lines(self) -> list[tuple[str, str]]:
        """(style, text) rows to draw: a window of the tree around the selection, then the keys."""
        start = max(0, min(self.index - VISIBLE // 2, len(self.nodes) - VISIBLE))
        rows = []
        for offset, node in enumerate(self.nodes[start:start + VISIBLE]):
            here = start + offset == self.index
            style = "reverse" if here else "bold" if node.is_head else "" if node.on_branch else "fg:ansibrightblack"
            rows.append((style, f"{'❯' if here else ' '} {node.text()}"))
        rows.append(("italic", f"{HINT}   ({self.index + 1}/{len(self.nodes)})"))
        return rows


def choose(nodes: list[Node], pt_input=None, pt_output=None) -> str | None:
    """Run the chooser inline; the chosen entry id, or None when left with Esc or Ctrl-C."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.layout import FormattedTextControl, Layout, Window

    state = TreeChooser(nodes)
    keys = KeyBindings()
    for key, delta in (("up", -1), ("down", 1), ("pageup", -VISIBLE), ("pagedown", VISIBLE),
                       ("home", -len(nodes)), ("end", len(nodes))):
        keys.add(key)(lambda event, delta=delta: state.move(delta))
    keys.add("enter")(lambda event: event.app.exit(result=state.selected()))
    keys.add("escape", eager=True)(lambda event: event.app.exit(result=None))
    keys.add("c-c")(lambda event: event.app.exit(result=None))

    def draw():
        return [(style, text + "\n") for style, text in state.lines()]

    app = Application(layout=Layout(Window(FormattedTextControl(draw), dont_extend_height=True)),
                      key_bindings=keys, full_screen=False, input=pt_input, output=pt_output, erase_when_done=True)
    return app.run()
