"""Reading the person's input: prompt_toolkit on a terminal, plain lines otherwise.

Both readers return a line, or None at end of input (Ctrl-D on an empty
line, closed stdin); Ctrl-C while typing raises KeyboardInterrupt, which the
REPL treats as "clear the line". prompt_toolkit is imported only here, and
only when a terminal is there to use it.
"""

import os
import select
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, TextIO

CONTINUATION = "… "


class PlainReader:
    """Lines from a stream (pipes, scripts, dumb terminals)."""

    def __init__(self, stream: TextIO, echo: TextIO | None = None):
        self._stream = stream
        self._echo = echo

    def read(self, prompt: str) -> str | None:
        if self._echo is not None:
            self._echo.write(prompt)
            self._echo.flush()
        line = self._stream.readline()
        if not line:
            return None
        return line.rstrip("\n")

    def ask(self, question: str) -> str | None:
        return self.read(question)

    def wait_for_input(self, message: str, seconds: float) -> str | None:
        """A line typed within `seconds`, or None when none came (or input has ended)."""
        try:
            ready, _, _ = select.select([self._stream], [], [], seconds)
        except (TypeError, ValueError, OSError):
            time.sleep(seconds)
            return None
        return self._stream.readline().rstrip("\n") or None if ready else None


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

    def read(self, prompt: str) -> str | None:
        try:
            return self._session.prompt(prompt)
        except EOFError:
            return None

    def ask(self, question: str) -> str | None:
        """A one-off answer without history or toolbar (Esc or Ctrl-C gives None)."""
        from prompt_toolkit.key_binding import KeyBindings

        bindings = KeyBindings()

        @bindings.add("escape", eager=True)
        def _cancel(event):
            event.app.exit(result=None)

        try:
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
            return self._session.prompt(message, pre_run=pre_run)
        except EOFError:
            return None
        finally:
            for timer in timers:
                timer.cancel()

    def pick(self, state):
        """Run the inline session picker on this reader's terminal."""
        from khaelor.picker import pick

        return pick(state, self._session.input, self._session.output)

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
