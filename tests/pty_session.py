"""Drive KHAELOR in a real pseudo-terminal: type keys, read the bytes the terminal would get."""

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

from tests.conftest import khaelor_env


def _controlling_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty, so Ctrl-C raises SIGINT."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtySession:
    """`python -m khaelor ARGS` on the slave side of a fresh pty."""

    def __init__(self, args: list[str], cwd, api=None, rows: int = 30, cols: int = 120, **extra):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = khaelor_env(api, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1", **extra)
        env.pop("NO_COLOR", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "khaelor", *args], cwd=cwd, env=env, stdin=slave,
                                     stdout=slave, stderr=slave, preexec_fn=_controlling_terminal, close_fds=True)
        os.close(slave)
        self.master = master
        self.output = b""
        self.cursor = 0

    def send(self, data: str | bytes) -> None:
        os.write(self.master, data.encode() if isinstance(data, str) else data)

    def read_until(self, needle: bytes | str, timeout: float = 30.0) -> bytes:
        """Read until `needle` appears after the previous match; returns the bytes up to and including it."""
        needle = needle.encode() if isinstance(needle, str) else needle
        start = self.cursor
        deadline = time.monotonic() + timeout
        while (found := self.output.find(needle, start)) < 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._pump(remaining):
                raise AssertionError(f"did not see {needle!r}; got {self.output[start:][-2000:]!r}")
        self.cursor = found + len(needle)
        return self.output[start:self.cursor]

    def _pump(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], min(timeout, 0.5))
        if not ready:
            return self.proc.poll() is None or True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:
            return False
        if not chunk:
            return False
        self.output += chunk
        return True

    def interrupt(self) -> None:
        """Ctrl-C as the terminal driver delivers it: SIGINT to the foreground process group."""
        self.send(b"\x03")

    def wait(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._pump(0.1)
        return self.proc.wait(max(0.1, deadline - time.monotonic()))

    def close(self) -> None:
        """Kill the process group if still running; release the pty (idempotent)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
