"""What the person types while a turn runs (SPEC §3): `/goal` now, everything else after the turn.

A `Watcher` thread runs only inside a turn (`with watcher:`), never blocks
(each step polls with a zero timeout, POLL seconds apart) and is joined when
the turn ends, so no thread is left reading standard input. Two sources:

* `LineBuffer` — pipes, scripts, dumb terminals. It is the one owner of the
  file descriptor: the reader and the watcher read through the same buffer
  under one lock, so no byte is read twice or lost. During a turn only a
  `/goal` line that is the next unread line is taken; every other line stays
  unread for whoever reads next (a permission prompt, or the prompt after
  the turn). Lines are decoded strictly: invalid UTF-8 is a UsageError.
* `TerminalLines` — a terminal between prompts, in cooked mode: the kernel
  edits and echoes the line, hands it over only on Enter, and Ctrl-C stays a
  SIGINT for the main thread. Finished `/goal` lines are applied at once;
  other finished lines are kept, in order, for the prompts after the turn; a
  line still being typed stays in the terminal for the next prompt.

`apply(line)` is called on the watcher thread; the caller makes it safe.
"""

import os
import select
import termios
import threading
import time
from contextlib import contextmanager
from typing import Callable

from khaelor.errors import UsageError

POLL = 0.05
CHUNK = 65536

Apply = Callable[[str], None]


def is_goal(line: str) -> bool:
    """Whether a typed line is a /goal command (the one command applied while a turn runs)."""
    word = line.strip()
    return word == "/goal" or word.startswith(("/goal ", "/goal\t"))


class Watcher:
    """Calls `step()` every POLL seconds on a thread of its own, between start() and stop()."""

    def __init__(self, step: Callable[[], None]):
        self._step = step
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="khaelor-typeahead", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and join; returns once the thread has finished its last step."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            self._step()

    def __enter__(self) -> "Watcher":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextmanager
    def paused(self):
        """Hand the input to someone else for a moment (a prompt), then watch again."""
        running = self.running
        if running:
            self.stop()
        try:
            yield
        finally:
            if running:
                self.start()


def _ready(fd: int, timeout: float | None) -> bool:
    ready, _, _ = select.select([fd], [], [], timeout)
    return bool(ready)


class LineBuffer:
    """Lines from a file descriptor through one buffer, shared by the reader and a watcher thread."""

    def __init__(self, fd: int):
        self._fd = fd
        self._data = bytearray()  # consumed from the front: amortized O(1) in CPython, so many lines stay linear
        self._ended = False
        self._count = 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, stream) -> "LineBuffer | None":
        """A buffer over `stream`'s descriptor; None for an in-memory stream (no descriptor to share)."""
        try:
            return cls(stream.fileno())
        except (AttributeError, OSError, ValueError):
            return None

    def next_line(self, timeout: float | None = None) -> str | None:
        """The next line (without its newline); None at end of input, or when `timeout` passed without one."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while not self._complete():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._fill(remaining)
            return self._pop()

    def take_if(self, wanted: Callable[[str], bool]) -> str | None:
        """The next line if it is complete and `wanted`; otherwise None and the line stays unread. Never blocks."""
        with self._lock:
            if not self._complete():
                self._fill(0)
            if not self._complete() or not self._data:
                return None
            try:
                head = _decode(bytes(self._data[:self._line_end()]))
            except UnicodeDecodeError:
                return None
            return self._pop() if wanted(head) else None

    def _line_end(self) -> int:
        """Where the first line ends: its newline, or the end of what is left at end of input."""
        end = self._data.find(b"\n")
        return len(self._data) if end < 0 else end

    def _complete(self) -> bool:
        return self._ended or b"\n" in self._data

    def _fill(self, timeout: float | None) -> None:
        if not _ready(self._fd, timeout):
            return
        chunk = os.read(self._fd, CHUNK)
        self._data += chunk
        self._ended = not chunk

    def _pop(self) -> str | None:
        if not self._data:
            return None
        end = self._line_end()
        raw = bytes(self._data[:end])
        del self._data[:end + 1]
        self._count += 1
        try:
            return _decode(raw)
        except UnicodeDecodeError as exc:
            raise UsageError(f"standard input is not valid UTF-8 (line {self._count}, byte {exc.start})") from None


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8")
    return text[:-1] if text.endswith("\r") else text


@contextmanager
def watch_lines(lines: LineBuffer, apply: Apply):
    """While the block runs, apply each `/goal` line that becomes the next unread line of `lines`."""
    def step() -> None:
        try:
            line = lines.take_if(is_goal)
        except OSError:
            return  # a broken input is the reader's to report, on its next read
        if line is not None:
            apply(line)

    with Watcher(step):
        yield


class TerminalLines:
    """Lines finished on a cooked-mode terminal while a turn runs; `/goal` applied at once, the rest kept."""

    def __init__(self, fd: int):
        self.typed: list[str] = []
        """Finished lines, oldest first, for the prompts after the turn."""
        self._fd = fd
        self._partial = b""
        self._apply: Apply | None = None
        self._closed = False
        self._watcher = Watcher(self._step)

    @classmethod
    def of(cls, fd: int | None) -> "TerminalLines | None":
        """Lines of `fd` when it is a terminal in cooked mode (the kernel's line editing and echo)."""
        try:
            return cls(fd) if fd is not None and termios.tcgetattr(fd)[3] & termios.ICANON else None
        except (termios.error, OSError, TypeError):
            return None

    @contextmanager
    def watch(self, apply: Apply):
        """Watch the terminal while the block runs; the thread is joined before it returns."""
        self._apply, self._closed = apply, False
        try:
            with self._watcher:
                yield
        finally:
            self._apply = None

    def paused(self):
        """Leave the terminal to a prompt (a permission question) for a moment."""
        return self._watcher.paused()

    def next_typed(self) -> str | None:
        """The oldest line finished during a turn and not handled yet."""
        return self.typed.pop(0) if self.typed else None

    def take_draft(self) -> str:
        """What was typed and ended with Ctrl-D but not Enter: the next prompt starts with it."""
        draft, self._partial = self._partial, b""
        return draft.decode("utf-8", "replace")

    def _step(self) -> None:
        if self._closed:
            return
        try:
            if not _ready(self._fd, 0):
                return
            chunk = os.read(self._fd, CHUNK)
        except (OSError, ValueError):
            chunk = b""
        # Ctrl-D on an empty line, or a hung-up terminal: stop reading until the next turn.
        self._closed = not chunk
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if is_goal(line) and self._apply is not None:
                self._apply(line)
            elif line.strip():
                self.typed.append(line)
