"""Reading the person's input: prompt_toolkit on a terminal, plain lines otherwise.

Both readers return a line, or None at end of input (Ctrl-D on an empty
line, closed stdin); Ctrl-C while typing raises KeyboardInterrupt, which the
REPL treats as "clear the line". prompt_toolkit is imported only here, and
only when a terminal is there to use it.

While a turn runs, `with reader.watch(apply):` lets the person's `/goal`
lines through at once (`apply(line)`, on a watcher thread) and keeps the
rest for the prompts after the turn (see `typeahead`).
"""

import os
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Iterable, TextIO

from khaelor.typeahead import Apply, LineBuffer, TerminalLines, is_goal, watch_lines

CONTINUATION = "… "


class PlainReader:
    """Lines from a stream (pipes, scripts, dumb terminals), read through one shared buffer."""

    def __init__(self, stream: TextIO, echo: TextIO | None = None):
        self._stream = stream
        self._echo = echo
        self._lines = LineBuffer.of(stream)
        self._apply: Apply | None = None

    def read(self, prompt: str, default: str = "") -> str | None:
        """The next line; `default` (text handed back for editing) cannot be offered on a plain stream.

        While a turn is watched, /goal lines met on the way are applied, never taken as answers.
        """
        if self._echo is not None:
            self._echo.write(prompt)
            self._echo.flush()
        while True:
            line = self._next_line()
            if line is None or self._apply is None or not is_goal(line):
                return line
            self._apply(line)

    def _next_line(self) -> str | None:
        if self._lines is not None:
            return self._lines.next_line()
        line = self._stream.readline()
        return line.rstrip("\n") if line else None

    def ask(self, question: str) -> str | None:
        return self.read(question)

    def wait_for_input(self, message: str, seconds: float) -> str | None:
        """A line typed within `seconds`, or None when none came (or input has ended)."""
        if self._lines is None:
            time.sleep(seconds)  # an in-memory stream cannot be waited on
            return None
        return self._lines.next_line(seconds) or None

    @contextmanager
    def watch(self, apply: Apply):
        """While the block (a turn) runs: a /goal line that comes next is applied at once; the rest stays unread."""
        self._apply = apply
        try:
            with watch_lines(self._lines, apply) if self._lines is not None else nullcontext():
                yield
        finally:
            self._apply = None


class ToolkitReader:
    """prompt_toolkit's PromptSession: history, completion, a bottom status line."""

    def __init__(self, history: Path | None, words: Callable[[str], Iterable[str]],
                 toolbar: Callable[[], object], pt_input=None, pt_output=None):
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("escape", "enter")
        def _newline(event):
            event.current_buffer.insert_text("\n")

        self._session = PromptSession(
            history=_private_history(history) if history else InMemoryHistory(),
            completer=_Completer(words), bottom_toolbar=toolbar, key_bindings=bindings,
            complete_while_typing=False, input=pt_input, output=pt_output,
            prompt_continuation=lambda width, line, wrap: CONTINUATION.rjust(width),
        )
        self._typed: TerminalLines | None = None

    def read(self, prompt: str, default: str = "") -> str | None:
        """A line typed at `prompt`, starting from `default` (text handed back for editing)."""
        try:
            return self._prompt(prompt, default)
        except EOFError:
            return None

    def _prompt(self, message: str, default: str = "", **options):
        """A prompt that first replays, one by one, the lines finished during the last turn."""
        lines = self._typed
        typed = lines.next_typed() if lines else None
        if typed is not None:
            return self._session.prompt(message, default=typed, accept_default=True, **options)
        return self._session.prompt(message, default=default + (lines.take_draft() if lines else ""), **options)

    def watch(self, apply: Apply):
        """While a turn runs: /goal lines finished on the terminal are applied at once, the rest kept for after."""
        if self._typed is None:
            self._typed = TerminalLines.of(self._terminal_fd())
        return self._typed.watch(apply) if self._typed else nullcontext()

    def _terminal_fd(self) -> int | None:
        try:
            fd = self._session.input.fileno()
        except (AttributeError, NotImplementedError, OSError, ValueError):
            return None
        return fd if os.isatty(fd) else None

    def ask(self, question: str) -> str | None:
        """A one-off answer without history or toolbar (Esc or Ctrl-C gives None)."""
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("escape", eager=True)
        def _cancel(event):
            event.app.exit(result=None)

        try:
            with self._typed.paused() if self._typed else nullcontext():
                return self._session.prompt(question, bottom_toolbar=None, key_bindings=bindings,
                                            completer=None, default="")
        except (EOFError, KeyboardInterrupt):
            return None

    def wait_for_input(self, message: str, seconds: float) -> str | None:
        """What the person types during a grace period; None when the time ran out untouched.

        Typing anything stops the clock: the line they finish becomes their
        next request. Ctrl-C raises KeyboardInterrupt; end of input is no input.
        """
        app = self._session.app
        timers = []

        def expire():
            if app.is_running and not app.current_buffer.text:
                app.exit(result=None)

        def pre_run():
            loop = app.loop
            timer = threading.Timer(seconds, lambda: loop.call_soon_threadsafe(expire) if not loop.is_closed() else None)
            timer.daemon = True
            timers.append(timer)
            timer.start()

        try:
            return self._prompt(message, pre_run=pre_run)
        except EOFError:
            return None
        finally:
            for timer in timers:
                timer.cancel()

    def pick(self, state):
        """Run the inline session picker on this reader's terminal."""
        from khaelor.picker import pick

        return pick(state, self._session.input, self._session.output)

    def choose_entry(self, nodes):
        """Run /tree's inline chooser on this reader's terminal; the chosen entry id or None."""
        from khaelor.treepicker import choose

        return choose(nodes, self._session.input, self._session.output)

    def invalidate(self) -> None:
        app = self._session.app
        if app.is_running:
            app.invalidate()


def _private_history(path: Path):
    from prompt_toolkit.history import FileHistory

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    return FileHistory(str(path))


def _Completer(words: Callable[[str], Iterable[str]]):
    from prompt_toolkit.completion import Completer, Completion

    class SlashCompleter(Completer):
        """Completes what `words(text_before_cursor)` offers for the last word."""

        def get_completions(self, document, complete_event):
            text = document.text_before_cursor
            last = text.split(" ")[-1]
            for word in words(text):
                if word.startswith(last) and word != last:
                    yield Completion(word, start_position=-len(last))

    return SlashCompleter()
