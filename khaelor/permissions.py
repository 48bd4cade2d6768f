"""The permission engine: the one decision point every tool call passes (SPEC §5).

`decide(call, policy) -> Decision` — allow, ask or deny, with the reason, the
rule that matched, where that rule came from (`origin`: file and line) and
who grants the call: `rule:<source>` (user, project, local, cli, session) or
`mode`; once a question is answered, `user`, `print-mode` (nobody to ask) or
`no-answer`. The agent journals every decision before the call runs. The
engine never raises and never prompts: what it cannot judge asks.

Rule syntax (config lists `permissions.allow/ask/deny`, `--allow/--deny`,
session grants) — a tool name, optionally `: PATTERN`:

* `bash: PATTERN` (also governs `process` starts) matches ONE simple command
  of the parsed line (`shellparse`), word by word (`commandrules`): `npm
  test` matches exactly `npm test`, `git log *` is `git log` with any
  arguments. A compound line is allowed only if every simple command is allowed, every
  redirection that writes is allowed as a write of its target (`/dev/null`
  exempt) and nothing in it is not understood. Allow rules see through
  `env`, `timeout`, `nice`, `time` … but not `sudo`; commands run by
  `xargs`, `find -exec`, `bash -c`, `eval` must be allowed themselves.
  Deny and ask rules match at every wrapper level and by command basename.
* `read: PATH`, `edit: PATH` (`edit` covers write; `read` covers glob, grep,
  ls), `write/glob/grep/ls: PATH` — see `pathrules`. Deny and ask path rules
  also stop bash lines naming a matching path (best effort: a program can
  still open files it was not given).
* A bare tool name matches every call of that tool.

Precedence: deny > ask > allow > the mode's default. Modes: `default` (reads
inside the workspace allowed; edits, writes, bash ask), `accept-edits`
(+ edits and writes inside the workspace), `plan` (read-only: every write,
edit, write-redirection and bash command not provably read-only is denied,
whatever the allow rules say), `bypass` (everything, except what follows).
In every mode: deny rules hold; git mutations ask unless an allow rule whose
pattern names `git` literally matches; writes to `.git/`, `.khaelor/` and the
data root ask unless an allow rule with a pattern matches; writes outside the
workspace ask except in bypass; lines not understood ask.

The engine only decides; `asking` owns what happens to an ask (the person's
answer, or a denial when nobody can answer).
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from khaelor.commandrules import command_pattern, variants, words_match
from khaelor.config import Rule
from khaelor.errors import ConfigError
from khaelor.pathrules import PathPattern, Places, Target, expand_home, expand_word, path_pattern
from khaelor.shellparse import analyse
from khaelor.shellrisk import git_mutation, read_only
from khaelor.shellwords import DYNAMIC, Analysis, Command, Redirect, Word, Wrapper, join

READ_TOOLS = frozenset({"read", "glob", "grep", "ls"})
EDIT_TOOLS = frozenset({"write", "edit"})
COMMAND_TOOLS = frozenset({"bash", "process"})
SCANS = frozenset({"glob", "grep", "ls"})
COVERS = {"read": READ_TOOLS, "edit": EDIT_TOOLS, "bash": COMMAND_TOOLS}
EXEMPT_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/1", "/dev/fd/2"})
BYPASS_BANNER = ("BYPASS MODE — tool calls run without asking, except deny rules, git history changes "
                 "and writes to KHAELOR's own files")
"""What a front end shows, loudly, while the mode is bypass."""


@dataclass(frozen=True)
class Decision:
    """allow / ask / deny, why, the rule that matched, and who grants it."""

    verdict: str
    reason: str
    rule: str | None = None
    source: str = "mode"
    """The grantor: rule:<source>, mode, user, print-mode or no-answer."""
    origin: str | None = None
    """Where the rule was written: 'PATH:LINE' or 'command line'."""
    subject: str = ""
    """The exact command line or path the decision is about."""
    suggestions: tuple[str, ...] = ()
    """For ask: allow rules that would permit the call; empty when no rule can."""
    scope: str | None = None
    """For a person's answer: once, session, always or deny."""
    grants: tuple[str, ...] = ()
    """Rules this answer grants for the rest of the session."""
    message: str | None = None
    """For a denial by the person: what they want the model told."""

    def as_record(self) -> dict:
        """The fields of the journal's `permission` record."""
        record = {"decision": self.verdict, "reason": self.reason, "rule": self.rule, "source": self.source}
        for key in ("origin", "subject", "scope", "message"):
            if getattr(self, key):
                record[key] = getattr(self, key)
        for key in ("suggestions", "grants"):
            if getattr(self, key):
                record[key] = list(getattr(self, key))
        return record


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the permission engine sees it."""

    tool: str
    input: dict


@dataclass(frozen=True)
class _Compiled:
    """A rule ready to match: bare, a command pattern or a path pattern."""

    rule: Rule
    verdict: str
    words: tuple[str, ...] | None = None
    path: PathPattern | None = None

    @property
    def text(self) -> str:
        return rule_text(self.rule)

    def covers(self, tool: str) -> bool:
        return tool in COVERS.get(self.rule.tool, {self.rule.tool})

    def decision(self, subject: str = "") -> Decision:
        return Decision(self.verdict, f"{self.verdict} rule '{self.text}' ({self.rule.source})", self.text,
                        f"rule:{self.rule.source}", self.rule.origin or None, subject)


@dataclass
class Policy:
    """The mode, the rules and the places a session's decisions depend on.

    Constructing it compiles every rule: an invalid one raises a `ConfigError`
    naming its file and line. `grants` are rule texts the person granted for
    this session (replayed from the journal); invalid ones are ignored.
    """

    mode: str
    workspace: Path
    allow: list[Rule] = field(default_factory=list)
    ask: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)
    grants: tuple[str, ...] = ()
    home: Path | None = None
    """The home directory `~` stands for (default: the process's)."""
    data_root: Path | None = None
    """KHAELOR's data root (config, sessions): writes there always ask."""
    fold_case: bool | None = None
    """Whether paths compare case-insensitively; None detects it from the workspace."""

    def __post_init__(self):
        self.places = Places.of(self.workspace, self.home, self.data_root, self.fold_case)
        self.workspace, self.fold_case = self.places.workspace, self.places.fold
        self.rules = {verdict: [self._compile(rule, verdict) for rule in getattr(self, verdict)]
                      for verdict in ("deny", "ask", "allow")}
        self.rules["allow"] += [c for c in map(self.compile_grant, self.grants) if c is not None]
        self.guards = [c for c in self.rules["deny"] + self.rules["ask"] if c.path is not None]

    def with_grants(self, grants: Iterable[str]) -> "Policy":
        """This policy plus the session's grants."""
        grants = tuple(grants)
        return self if grants == self.grants else replace(self, grants=grants)

    def compile_grant(self, text: str) -> _Compiled | None:
        """A session grant's rule, compiled; None when the text is not a valid rule."""
        tool, colon, pattern = str(text).partition(":")
        rule = Rule(tool.strip(), pattern.strip() if colon and pattern.strip() else None, "session", "session grant")
        try:
            return _compile(rule, "allow", self.places)
        except ValueError:
            return None

    def _compile(self, rule: Rule, verdict: str) -> _Compiled:
        try:
            return _compile(rule, verdict, self.places)
        except ValueError as exc:
            where = rule.origin or rule.source
            raise ConfigError(f"{where}: invalid {verdict} rule '{rule_text(rule)}': {exc}") from None

    def first(self, verdict: str, tool: str, target: Target, real_only: bool = False,
              explicit: bool = False) -> _Compiled | None:
        """The first `verdict` rule covering `tool` that matches `target`."""
        for compiled in self.rules[verdict]:
            if not compiled.covers(tool) or compiled.words is not None:
                continue
            if compiled.path is None and not explicit:
                return compiled
            if compiled.path is not None and compiled.path.matches(target, real_only):
                return compiled
        return None

    def bare(self, verdict: str, tool: str) -> _Compiled | None:
        """The first bare `verdict` rule for `tool`."""
        return next((c for c in self.rules[verdict] if c.covers(tool) and c.words is None and c.path is None), None)

    def matching(self, verdict: str, tool: str, command: Command) -> _Compiled | None:
        """The first `verdict` rule for `tool` matching the command at any wrapper level."""
        for compiled in self.rules[verdict]:
            if compiled.covers(tool) and compiled.path is None and any(
                    compiled.words is None or words_match(compiled.words, form) for form in variants(command)):
                return compiled
        return None

    def allowing(self, tool: str, command: Command, git: bool = False) -> _Compiled | None:
        """The allow rule permitting the command, looking only past wrappers that allow it; `git`: rules naming git."""
        levels = [*command.wrappers, Wrapper(command.words, True, True)]
        for level in levels:
            if level.grants:
                for compiled in self.rules["allow"]:
                    if compiled.covers(tool) and compiled.path is None and _allows(compiled, level.words, git):
                        return compiled
            if not level.strip:
                return None
        return None


def rule_text(rule: Rule) -> str:
    """'tool: pattern', or just 'tool'."""
    return f"{rule.tool}: {rule.pattern}" if rule.pattern else rule.tool


def _compile(rule: Rule, verdict: str, places: Places) -> _Compiled:
    if not rule.pattern:
        return _Compiled(rule, verdict)
    if rule.tool in COMMAND_TOOLS:
        return _Compiled(rule, verdict, words=command_pattern(rule.pattern))
    return _Compiled(rule, verdict, path=path_pattern(rule.pattern, places))


def _allows(compiled: _Compiled, form: tuple[Word, ...], git: bool) -> bool:
    if compiled.words is None:
        return not git
    return words_match(compiled.words, form) and (not git or compiled.words[0] == "git")


# --- deciding ------------------------------------------------------------------------


def decide(call: ToolCall, policy: Policy) -> Decision:
    """The verdict for one call under `policy`. Never raises: a call it cannot judge is asked about."""
    judge = _JUDGES.get(call.tool)
    if judge is None:
        return Decision("deny", f"there is no tool named {call.tool!r}")
    try:
        return judge(call, policy)
    except Exception as exc:  # fail closed: an engine bug must ask, never allow and never crash the loop
        return Decision("ask", f"the permission check could not judge this call ({type(exc).__name__}: {exc})")


def _judge_file(call: ToolCall, policy: Policy) -> Decision:
    raw = call.input.get("path")
    if raw is None and call.tool not in EDIT_TOOLS | {"read"}:
        raw = "."
    if not isinstance(raw, str) or not raw or "\0" in raw:
        return Decision("deny", "path must be a non-empty string")
    return _judge_path(policy, call.tool, policy.places.target(raw), call.tool in EDIT_TOOLS)


def _judge_path(policy: Policy, tool: str, target: Target, writes: bool) -> Decision:
    """Rules, plan mode, protected areas, then the mode's default, for one path."""
    subject = target.lexical
    rule = policy.first("deny", tool, target)
    if rule:
        return rule.decision(subject)
    if writes and policy.mode == "plan":
        return Decision("deny", "plan mode is read-only: no writes or edits", subject=subject)
    rule = policy.first("ask", tool, target) or (tool in SCANS and _guarding(policy, target, tool))
    if rule:
        return rule.decision(subject) if rule.verdict == "ask" else _guarded_directory(rule, subject)
    suggestion = tuple(filter(None, [policy.places.rule_for(tool, target)]))
    area = writes and policy.places.protected_area(target)
    if area:
        rule = policy.first("allow", tool, target, real_only=True, explicit=True)
        return rule.decision(subject) if rule else Decision(
            "ask", f"{subject} is in {area}, where writes always ask", subject=subject, suggestions=suggestion)
    rule = policy.first("allow", tool, target, real_only=True)
    return rule.decision(subject) if rule else _path_default(policy, target, writes, suggestion)


def _path_default(policy: Policy, target: Target, writes: bool, suggestion: tuple[str, ...]) -> Decision:
    inside, mode = policy.places.inside(target), policy.mode
    if mode == "bypass":
        return Decision("allow", "bypass mode allows every call not denied by a rule", subject=target.lexical)
    if inside and not writes:
        return Decision("allow", "reads inside the workspace are allowed", subject=target.lexical)
    if inside and mode == "accept-edits":
        return Decision("allow", "accept-edits mode allows edits inside the workspace", subject=target.lexical)
    action = "writing" if writes else "reading"
    where = "outside the workspace" if not inside else f"in {mode} mode"
    return Decision("ask", f"{action} {target.lexical} {where} needs permission", subject=target.lexical,
                    suggestions=suggestion)


def _guarding(policy: Policy, directory: Target, tool: str) -> _Compiled | None:
    """A deny or ask rule covering part of a directory the tool lists or (grep) reads through."""
    loose = tool == "grep"
    return next((c for c in policy.guards if c.covers(tool) and c.path.inside(directory, loose)), None)


def _guarded_directory(rule: _Compiled, subject: str) -> Decision:
    return Decision("ask", f"{subject} holds paths that {rule.verdict} rule '{rule.text}' ({rule.rule.source}) "
                           "protects", rule.text, f"rule:{rule.rule.source}", rule.rule.origin or None, subject)


def _judge_process(call: ToolCall, policy: Policy) -> Decision:
    action = call.input.get("action")
    if action == "start":
        return _judge_line(call.tool, call.input.get("command"), policy)
    rule = policy.bare("deny", "process") or policy.bare("ask", "process")
    if rule:
        return rule.decision()
    if action in ("list", "log", "stop"):
        return Decision("allow", f"process {action} only touches this session's own background processes")
    return Decision("deny", f"unknown process action {action!r}")


def _judge_bash(call: ToolCall, policy: Policy) -> Decision:
    return _judge_line(call.tool, call.input.get("command"), policy)


def _judge_line(tool: str, line, policy: Policy) -> Decision:
    """A command line is allowed only if every part of it is."""
    if not isinstance(line, str) or not line.strip():
        return Decision("deny", "command must be a non-empty string")
    analysis = analyse(line)
    bases, unknown = _working_directories(analysis, policy)
    verdicts = [_judge_command(policy, tool, command) for command in analysis.commands]
    verdicts += [v for redirect in analysis.redirects for v in _judge_redirect(policy, redirect, bases, unknown)]
    verdicts += _judge_named_paths(policy, analysis, bases, unknown)
    verdicts += [_not_understood(policy, problem) for problem in analysis.problems]
    return _combine(verdicts, line)


def _judge_command(policy: Policy, tool: str, command: Command) -> Decision:
    form = _needed_form(command)
    subject = join(form)
    rule = policy.matching("deny", tool, command)
    if rule:
        return rule.decision(subject)
    if policy.mode == "plan" and not read_only(command):
        return Decision("deny", f"plan mode is read-only and `{subject}` may change things", subject=subject)
    rule = policy.matching("ask", tool, command)
    if rule:
        return rule.decision(subject)
    exact = (f"{tool}: {subject}",) if all(w.literal and not {"*", "?"} & set(w.text) for w in form) else ()
    if git_mutation(command):
        rule = policy.allowing(tool, command, git=True)
        return rule.decision(subject) if rule else Decision(
            "ask", f"`{subject}` changes git state, which always asks", subject=subject, suggestions=exact)
    rule = policy.allowing(tool, command)
    if rule:
        return rule.decision(subject)
    if policy.mode == "bypass":
        return Decision("allow", "bypass mode allows every call not denied by a rule", subject=subject)
    return Decision("ask", f"`{subject}` needs permission in {policy.mode} mode", subject=subject, suggestions=exact)


def _needed_form(command: Command) -> tuple[Word, ...]:
    """The command as an allow rule must name it: at the first wrapper level no allow rule may look past."""
    levels = [*command.wrappers, Wrapper(command.words, False, True)]
    return next(level.words for level in levels if not level.strip)


def _judge_redirect(policy: Policy, redirect: Redirect, bases: list[Path], unknown: bool
                    ) -> list[Decision]:
    """A redirection that writes is a write of its target, from every directory the line may be in."""
    target = redirect.target
    if not redirect.writes or (target.literal and target.text in EXEMPT_TARGETS):
        return []
    if not target.literal:
        return [_not_understood(policy, f"the redirection target {target.text} is only known when it runs")]
    if unknown and not target.text.startswith(("/", "~")):
        return [_not_understood(policy, "the directory a relative redirection writes to is only known when it runs")]
    return [_judge_path(policy, "write", t, True) for t in expand_word(target, policy.places, bases)]


def _judge_named_paths(policy: Policy, analysis: Analysis, bases: list[Path], unknown: bool
                       ) -> list[Decision]:
    """Deny and ask path rules against every path the line names."""
    if not policy.guards:
        return []
    verdicts = []
    for word in _path_words(analysis):
        targets = None if word.kind == DYNAMIC else expand_word(word, policy.places, bases)
        relative = not expand_home(word.text, policy.places.home).startswith("/")
        if targets is None or (unknown and relative):
            verdicts.append(Decision("ask", f"`{word.text}` is only known when it runs, so path rule "
                                            f"'{policy.guards[0].text}' cannot be checked", subject=word.text))
            continue
        verdicts += [v for target in targets for v in _guard_verdicts(policy, target)]
    return verdicts


def _guard_verdicts(policy: Policy, target: Target) -> Iterator[Decision]:
    for rule in policy.guards:
        if rule.path.matches(target):
            yield rule.decision(target.lexical)
        elif rule.path.inside(target) and Path(target.real).is_dir():
            yield _guarded_directory(rule, target.lexical)


def _path_words(analysis: Analysis) -> list[Word]:
    """Every word of the line that could be a path: arguments, option values, redirection targets."""
    words = [w for c in analysis.commands for form in c.forms() for w in form[1:]]
    words += [r.target for r in analysis.redirects]
    found = []
    for word in words:
        if word.literal and word.text.startswith("-"):
            value = word.text.split("=", 1)[1] if "=" in word.text else word.text[2:]
            if "/" not in value and not value.startswith("~"):
                continue
            word = Word(value)
        found.append(word)
    return list(dict.fromkeys(found))


def _working_directories(analysis: Analysis, policy: Policy) -> tuple[list[Path], bool]:
    """Every directory relative paths of the line may be taken from; True if one is only known when it runs."""
    bases, unknown = [policy.workspace], False
    for command in analysis.commands:
        if command.name not in ("cd", "pushd", "popd"):
            continue
        args = [w for w in command.words[1:] if not (w.literal and w.text.startswith("-") and w.text != "-")]
        if command.name == "popd" or (args and (not args[0].literal or args[0].text == "-")):
            unknown = True
            continue
        raw = args[0].text if args else "~"
        bases += [Path(policy.places.target(raw, base).real) for base in bases]
    return list(dict.fromkeys(bases)), unknown


def _not_understood(policy: Policy, problem: str) -> Decision:
    if policy.mode == "plan":
        return Decision("deny", f"plan mode runs only what it can prove read-only, and {problem}")
    return Decision("ask", f"not understood: {problem}")


def _combine(verdicts: list[Decision], line: str) -> Decision:
    """deny if any part is denied, else ask if any part asks, else allow."""
    denied = next((v for v in verdicts if v.verdict == "deny"), None)
    if denied:
        return replace(denied, subject=line)
    asks = [v for v in verdicts if v.verdict == "ask"]
    if asks:
        suggestions = () if any(not a.suggestions for a in asks) else tuple(
            dict.fromkeys(s for a in asks for s in a.suggestions))
        reason = "; ".join(dict.fromkeys(a.reason for a in asks[:3])) + ("; …" if len(asks) > 3 else "")
        first = asks[0]
        return Decision("ask", reason, first.rule, first.source, first.origin, line, suggestions)
    if not verdicts:
        return Decision("allow", "the line runs no command", subject=line)

    def joined(key: str, glue: str) -> str | None:
        return glue.join(dict.fromkeys(getattr(v, key) for v in verdicts if getattr(v, key))) or None

    return Decision("allow", joined("reason", "; "), joined("rule", "; "), joined("source", "+"),
                    joined("origin", "; "), line)


_JUDGES = {
    "read": _judge_file,
    "write": _judge_file,
    "edit": _judge_file,
    "glob": _judge_file,
    "grep": _judge_file,
    "ls": _judge_file,
    "bash": _judge_bash,
    "process": _judge_process,
}
