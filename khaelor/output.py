"""The only path by which text reaches the person's terminal.

Everything the model or a tool produced is sanitized here and only here:
escape sequences (CSI, OSC — including OSC 8 links, OSC 52 clipboard writes
and title changes — DCS, SOS/PM/APC, two-byte ESC sequences), C1 controls,
BEL, backspace and carriage-return overwrites, other C0 controls, and bidi
overrides are removed, so no sequence of theirs can move the cursor, clear
the screen, rename the window, touch the clipboard or hide text. KHAELOR's own
styling is added after sanitizing, and only when colour is wanted (a TTY,
no NO_COLOR, TERM not dumb).
"""

import re
import sys
from dataclasses import dataclass
from typing import TextIO

_SEQUENCE = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]                       # CSI
    | \x9b[0-?]*[ -/]*[@-~]                         # 8-bit CSI
    | [\x1b][\]PX^_].*?(?:\x07|\x1b\\|\x9c)         # OSC, DCS, SOS, PM, APC up to a terminator
    | [\x9d\x90\x98\x9e\x9f].*?(?:\x07|\x1b\\|\x9c) # their 8-bit forms
    | \x1b(?![\[\]PX^_])[ -/]*[0-~]                 # other ESC sequences (charset, keypad, RIS ...)
    """,
    re.VERBOSE | re.DOTALL,
)
_UNTERMINATED = re.compile(r"[\x1b\x9b\x9d\x90\x98\x9e\x9f]")
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_INTRODUCERS = "\x1b\x9b\x9d\x90\x98\x9e\x9f"
_PENDING_LIMIT = 4096


def sanitize(text: str) -> str:
    """`text` with every terminal control sequence and invisible control removed."""
    if _CONTROLS.search(text) is None:
        return text  # every sequence starts with, and CR is, one of these controls
    text = _SEQUENCE.sub("", text)
    text = text.replace("\r\n", "\n")
    text = _UNTERMINATED.sub("", text)
    return _CONTROLS.sub("", text)


class StreamSanitizer:
    """Sanitizes text that arrives in pieces: a sequence split across pieces is held back until complete."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, piece: str) -> str:
        text = self._pending + piece
        cut = _open_sequence_start(text)
        self._pending, text = (text[cut:], text[:cut]) if cut is not None else ("", text)
        return sanitize(text)

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return sanitize(text)


def _open_sequence_start(text: str) -> int | None:
    """Where an unfinished escape sequence (or a CR that may start CRLF) begins at the end of `text`."""
    if text.endswith("\r"):
        return len(text) - 1
    start = max(text.rfind(c) for c in _INTRODUCERS)
    if start < 0 or len(text) - start > _PENDING_LIMIT or _SEQUENCE.match(text, start):
        return None
    return start


STYLES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36",
          "urgent": "1;31", "warn": "33"}


def wants_color(stream: TextIO, environ: dict[str, str]) -> bool:
    """Colour only on a terminal, and never with NO_COLOR or TERM=dumb."""
    if "NO_COLOR" in environ or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@dataclass
class Output:
    """Writes to the terminal: sanitized, optionally styled."""

    stdout: TextIO = sys.stdout
    stderr: TextIO = sys.stderr
    color: bool = False

    def style(self, text: str, style: str | None) -> str:
        """KHAELOR's own styling around already-sanitized text."""
        if not style or not self.color:
            return text
        return f"\x1b[{STYLES[style]}m{text}\x1b[0m"

    def message(self, text: str, style: str | None = None) -> None:
        """A whole line of foreign or own text on stdout."""
        self.stdout.write(self.style(sanitize(text), style) + "\n")
        self.stdout.flush()

    def raw(self, text: str) -> None:
        """Already-sanitized (or KHAELOR's own) text, as is."""
        self.stdout.write(text)
        self.stdout.flush()

    def warn(self, text: str) -> None:
        self.stderr.write(self.style(sanitize(text), "warn") + "\n")
        self.stderr.flush()

    def error(self, text: str) -> None:
        self.stderr.write(self.style(sanitize(text), "red") + "\n")
        self.stderr.flush()

    def title(self, text: str) -> None:
        """Set the window title (only on a terminal; the text is sanitized)."""
        try:
            if not self.stdout.isatty():
                return
        except (AttributeError, ValueError):
            return
        self.stdout.write(f"\x1b]0;{sanitize(text)}\x07")
        self.stdout.flush()
