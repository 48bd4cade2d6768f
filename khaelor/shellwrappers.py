"""Commands that run other commands: how the shell analysis sees through them.

Owns `WRAPPERS`, one unwrapper per command name — `env`, `command`,
`builtin`, `exec`, `nice`, `nohup`, `timeout`, `time`, `stdbuf`, `setsid`,
`coproc`, `noglob`, `nocorrect`, `sudo`, `doas`, `xargs`, `find`, `eval`,
`trap`, `watch` and the shells (`bash -c` …) — and how each one's options
are read. An unwrapper reports the command it runs to the walker, under a
`Wrapper` level saying whether allow rules may look past it (`strip`) and
whether a rule for the whole form covers the inner command (`grants`); a
script given as a literal (`bash -c`, `eval`, `trap`, `watch`) is parsed
again. Options it does not know are a problem, never a guess: a misread
option would shift which word is the command.
"""

import re
from dataclasses import dataclass
from typing import Protocol

from khaelor.shellwords import DYNAMIC, Word, join


class Scope(Protocol):
    """Where found commands run: `wrappers` so far and the `bash -c` nesting."""

    nesting: int

    def within(self, words: tuple[Word, ...], strip: bool, grants: bool) -> "Scope": ...


class Walker(Protocol):
    """What an unwrapper reports to."""

    def run(self, words: tuple[Word, ...], scope: Scope, stdin: str | None = None) -> None: ...

    def script(self, source: str, scope: Scope, nesting: int) -> None: ...

    def record(self, words: tuple[Word, ...], scope: Scope) -> None: ...

    def problem(self, text: str) -> None: ...


SAFE_ENV = re.compile(r"LANG|LANGUAGE|LC_[A-Z]+|TZ|TERM|NO_COLOR|FORCE_COLOR|CLICOLOR(_FORCE)?|COLUMNS|LINES|CI|"
                      r"NODE_ENV|RUST_BACKTRACE|RUST_LOG|PYTHONUNBUFFERED|PYTHONDONTWRITEBYTECODE|PYTHONIOENCODING")


def safe_assignment(word: Word) -> bool:
    """`NAME=value` that cannot change which program runs or how (locale, colour, timezone …)."""
    name = word.text.split("=", 1)[0]
    return word.literal and bool(SAFE_ENV.fullmatch(name))


@dataclass(frozen=True)
class _Options:
    """How a wrapper's options are written: which take a value, which are plain flags."""

    values: frozenset = frozenset()
    flags: frozenset = frozenset()
    stop: frozenset = frozenset()
    """Options after which no command is run (`command -v`, `sudo -l` …)."""

    def skip(self, words: tuple[Word, ...], start: int) -> int | None:
        """Index of the first operand at or after `start`; None if an option is not understood."""
        i = start
        while i < len(words):
            word = words[i]
            text = word.text
            if not word.literal:
                return None
            if text == "--":
                return i + 1
            if text in self.stop:
                return len(words) + 1
            if text not in self.flags and (not text.startswith("-") or text == "-"):
                return i
            step = self._option(text)
            if step is None:
                return None
            i += step
        return i

    def _option(self, text: str) -> int | None:
        """How many words the option `text` takes up, None if unknown."""
        if text in self.flags:
            return 1
        if text in self.values:
            return 2
        name = text.split("=", 1)[0]
        if text.startswith("--"):
            return 1 if "=" in text and name in self.values | self.flags else None
        for index, letter in enumerate(text[1:], 1):
            option = "-" + letter
            if option in self.stop:
                return None
            if option in self.values:
                return 1 if index < len(text) - 1 else 2
            if option not in self.flags:
                return None
        return 1


def _prefix(options: _Options, operands: int = 0, strip: bool = True):
    """An unwrapper for `wrapper [options] [operands] command …`."""

    def unwrap(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
        start = options.skip(words, 1)
        if start is None:
            walker.problem(f"the options of {words[0].text!r} are not understood")
            return False
        start += operands
        if start >= len(words):
            return False
        walker.run(words[start:], scope.within(words, strip, True), stdin)
        return True

    return unwrap


def _env(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
    start = _Options(frozenset({"-u", "--unset"}),
                     frozenset({"-", "-i", "-0", "-v", "--ignore-environment", "--null", "--debug"})).skip(words, 1)
    if start is None:
        walker.problem("the options of 'env' are not understood")
        return False
    assignments = []
    while start < len(words) and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[start].text):
        assignments.append(words[start])
        start += 1
    if start >= len(words):
        return False
    walker.run(words[start:], scope.within(words, all(map(safe_assignment, assignments)), True), stdin)
    return True


def _xargs(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
    """`xargs cmd` runs `cmd` with arguments read from its input: a command that needs allowing itself."""
    options = _Options(
        frozenset({"-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a", "--arg-file", "--delimiter", "--max-args",
                   "--max-procs", "--max-lines", "--max-chars", "--eof", "--process-slot-var", "--replace"}),
        frozenset({"-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-p", "--interactive", "-x",
                   "--exit", "-o", "--open-tty", "-i", "-l", "-e"}),
        frozenset({"--help", "--version", "--show-limits"}))
    start = options.skip(words, 1)
    if start is None:
        walker.problem("the options of 'xargs' are not understood")
        return False
    if start > len(words):
        return False
    inner = words[start:] or (Word("echo"),)
    walker.run(inner + (Word("<input>", DYNAMIC),), scope.within(words, True, False))
    return True


FIND_RUNS = ("-exec", "-execdir", "-ok", "-okdir")
FIND_VALUES = frozenset("-name -iname -path -ipath -wholename -iwholename -lname -ilname -regex -iregex -type "
                        "-xtype -newer -user -group -size -mtime -mmin -atime -amin -ctime -cmin -perm -maxdepth "
                        "-mindepth -samefile -inum -links -uid -gid".split())


def _find(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
    """`find … -exec cmd {} ;`: find itself, and each command it runs, need allowing."""
    walker.record(words, scope)
    for before, word in zip(words[1:], words[2:]):
        if not word.literal and before.text not in FIND_VALUES:
            walker.problem(f"find's expression {word.text!r} is only known when it runs")
    i = 1
    while i < len(words):
        if words[i].text not in FIND_RUNS:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(words)) if words[j].text in (";", "+")), None)
        if end is None or end == i + 1:
            walker.problem(f"find {words[i].text} without a complete command")
            return True
        inner = tuple(Word(w.text, DYNAMIC) if "{}" in w.text else w for w in words[i + 1:end])
        walker.run(inner, scope.within(words, True, False))
        i = end + 1
    return True


SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _shell(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
    """`bash -c 'script'`, `sh -c …`: the script is analysed; a script file is a command of its own."""
    i, inline = 1, False
    while i < len(words) and words[i].literal:
        text = words[i].text
        if text in SHELL_VALUE_OPTIONS:
            i += 2
        elif text in ("-", "--"):
            i += 1
            break
        elif text.startswith("-") and not text.startswith("--") and len(text) > 1:
            inline = inline or "c" in text
            i += 1
        elif text.startswith(("--", "+")):
            i += 1
        else:
            break
    operands = words[i:]
    if operands and not operands[0].literal:
        walker.problem(f"what {words[0].text} runs ({operands[0].text}) is only known when it runs")
        return False
    if inline:
        return _inline(walker, words, operands[0] if operands else None, scope)
    if operands:
        return False
    if stdin is None:
        walker.problem(f"{words[0].text} reads the commands to run from its standard input")
        return False
    walker.script(stdin, scope.within(words, True, False), scope.nesting + 1)
    return True


def _inline(walker: Walker, words: tuple[Word, ...], script: Word | None, scope: Scope) -> bool:
    if script is None or not script.literal:
        walker.problem(f"the script given to {words[0].text} is only known when it runs")
        return False
    walker.script(script.text, scope.within(words, True, False), scope.nesting + 1)
    return True


def _eval(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
    if len(words) == 1:
        return False
    if not all(w.literal for w in words[1:]):
        walker.problem("eval of text only known when it runs")
        return False
    walker.script(" ".join(w.text for w in words[1:]), scope.within(words, True, False), scope.nesting + 1)
    return True


def _trap(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
    args = words[2:] if len(words) > 1 and words[1].text == "--" else words[1:]
    if len(args) < 2 or (args[0].literal and (args[0].text in ("", "-") or args[0].text.startswith("-"))):
        return False
    return _inline(walker, words, args[0], scope)


def _watch(walker: Walker, words: tuple[Word, ...], scope: Scope, stdin: str | None) -> bool:
    options = _Options(frozenset({"-n", "--interval", "-q", "--equexit"}),
                       frozenset({"-d", "--differences", "-t", "--no-title", "-b", "--beep", "-e", "--errexit",
                                  "-g", "--chgexit", "-c", "--color", "-C", "--no-color", "-x", "--exec", "-p",
                                  "--precise", "-w", "--no-wrap", "-r", "--no-rerun", "-f", "--follow"}))
    start = options.skip(words, 1)
    if start is None or start >= len(words):
        walker.problem("the options of 'watch' are not understood")
        return False
    rest = words[start:]
    if any(w.text in ("-x", "--exec") for w in words[1:start]):
        walker.run(rest, scope.within(words, True, False))
        return True
    return _inline(walker, words, _joined(rest), scope)


def _joined(words: tuple[Word, ...]) -> Word:
    if all(w.literal for w in words):
        return Word(" ".join(w.text for w in words))
    return Word(join(words), DYNAMIC)


_SUDO = _Options(
    frozenset({"-u", "-g", "-p", "-C", "-D", "-h", "-r", "-t", "-T", "-U", "--user", "--group", "--prompt",
               "--close-from", "--chdir", "--host", "--role", "--type", "--command-timeout", "--other-user"}),
    frozenset({"-A", "-b", "-E", "-H", "-n", "-P", "-S", "-s", "-i", "-k", "-B", "-N", "--askpass", "--background",
               "--preserve-env", "--set-home", "--non-interactive", "--preserve-groups", "--stdin", "--shell",
               "--login", "--reset-timestamp", "--bell", "--no-update"}),
    frozenset({"-l", "-v", "-V", "-K", "-e", "--list", "--validate", "--version", "--remove-timestamp", "--edit",
               "--help"}))

WRAPPERS = {
    "env": _env,
    "command": _prefix(_Options(flags=frozenset({"-p"}), stop=frozenset({"-v", "-V"}))),
    "builtin": _prefix(_Options()),
    "exec": _prefix(_Options(frozenset({"-a"}), frozenset({"-c", "-l"}))),
    "nice": _prefix(_Options(frozenset({"-n", "--adjustment"}),
                             frozenset(f"-{n}" for n in range(-20, 20)))),
    "nohup": _prefix(_Options()),
    "timeout": _prefix(_Options(frozenset({"-s", "--signal", "-k", "--kill-after"}),
                                frozenset({"--preserve-status", "--foreground", "-v", "--verbose"})), operands=1),
    "time": _prefix(_Options(frozenset({"-f", "--format"}),
                             frozenset({"-p", "-v", "--verbose", "-a", "--append", "-q", "--quiet", "--portability"}))),
    "stdbuf": _prefix(_Options(frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}))),
    "setsid": _prefix(_Options(flags=frozenset({"-c", "-f", "-w", "--ctty", "--fork", "--wait"}))),
    "coproc": _prefix(_Options()),
    "noglob": _prefix(_Options()),
    "nocorrect": _prefix(_Options()),
    "sudo": _prefix(_SUDO, strip=False),
    "doas": _prefix(_Options(frozenset({"-u", "-C"}), frozenset({"-n", "-s"}), frozenset({"-L"})), strip=False),
    "xargs": _xargs,
    "find": _find,
    "eval": _eval,
    "trap": _trap,
    "watch": _watch,
    **{shell: _shell for shell in ("bash", "sh", "zsh", "dash", "ksh", "mksh", "ash")},
}
