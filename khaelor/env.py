"""The outside world as one injectable object.

`Env` carries the streams, the environment variables, the working directory,
the data root and the clock, so that every module can be driven by a test
without patching globals. Nothing is read at import time.
"""

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO


@dataclass
class Env:
    """Streams, variables and paths of one KHAELOR process."""

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: Path = field(default_factory=Path.cwd)
    clock: Callable[[], float] = time.time

    @property
    def home(self) -> Path:
        """The data root: KHAELOR_HOME, else ~/.khaelor."""
        explicit = self.environ.get("KHAELOR_HOME")
        if explicit:
            return Path(explicit).expanduser()
        return Path(self.environ.get("HOME") or Path.home()) / ".khaelor"

    @property
    def debug(self) -> bool:
        """Whether tracebacks are wanted (KHAELOR_DEBUG=1)."""
        return self.environ.get("KHAELOR_DEBUG", "") not in ("", "0")

    def stdin_is_tty(self) -> bool:
        return _isatty(self.stdin)

    def stdout_is_tty(self) -> bool:
        return _isatty(self.stdout)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
