"""Exit statuses and the exceptions that cross module boundaries.

Every error meant for a person is a `KhaelorError` whose message is one
complete line; the command line prints it (plus an optional hint) and exits
with the status it carries. Anything else is a bug and shows a traceback only
under KHAELOR_DEBUG=1.
"""

from enum import IntEnum


class ExitStatus(IntEnum):
    """Process exit codes of the command line."""

    SUCCESS = 0
    ERROR = 1
    USAGE = 2
    INTERRUPTED = 130
    TERMINATED = 143


class KhaelorError(Exception):
    """An error with a one-line message for the person, and an exit status."""

    status = ExitStatus.ERROR

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(KhaelorError):
    """The command line or its arguments are wrong."""

    status = ExitStatus.USAGE


class ConfigError(KhaelorError):
    """A configuration file or value is wrong; the message names file, line and key."""

    status = ExitStatus.USAGE


class JournalError(KhaelorError):
    """A session log cannot be read or written as required."""


class SessionInUse(JournalError):
    """Another KHAELOR process holds the session's lock."""


class ModelError(KhaelorError):
    """The model API failed in a way retrying did not cure."""


class Cancelled(BaseException):
    """The run was interrupted by a signal; like KeyboardInterrupt, not an error to catch broadly."""

    def __init__(self, signal_name: str = "SIGINT"):
        super().__init__(signal_name)
        self.signal_name = signal_name

    @property
    def status(self) -> ExitStatus:
        return ExitStatus.TERMINATED if self.signal_name == "SIGTERM" else ExitStatus.INTERRUPTED
