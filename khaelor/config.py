"""Settings from YAML files and command-line flags, as validated dataclasses.

Owns the configuration files — user `<data root>/config.yaml`, project
`.khaelor/config.yaml`, local `.khaelor/config.local.yaml` — their merge and
the YAML edge of the whole program (`read_yaml`).

Invariants:
* the merge order is user → project → local → command line; a later scalar
  replaces an earlier one, permission rules accumulate (each keeps its source
  and origin), pricing entries replace the earlier entry of the same model;
* every value in a `Config` has been validated; every error is a one-line
  `ConfigError` naming the file and line (or "command line"), the dotted key
  and what was expected; unknown keys are errors, never ignored;
* YAML is composed with the safe loader and walked node by node, bounded in
  bytes, depth and node count; nothing is read before `load_config` runs, and
  PyYAML is imported only when there is a file to read.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
import difflib
import math
import os
from pathlib import Path
import stat
from typing import TYPE_CHECKING

from khaelor.cost import ModelPrice, parse_prices
from khaelor.env import Env
from khaelor.errors import ConfigError

if TYPE_CHECKING:
    import yaml

TOOLS = ("read", "write", "edit", "bash", "glob", "grep", "ls", "process")
PERMISSION_MODES = ("default", "accept-edits", "plan", "bypass")
RULE_KINDS = ("allow", "ask", "deny")
MAX_FILE_BYTES = 1 << 20
MAX_NODES = 20_000
MAX_DEPTH = 40
COMMAND_LINE = "command line"


@dataclass(frozen=True)
class Rule:
    """One permission rule and where it came from."""

    tool: str
    """The tool it governs: read, write, edit, bash, glob, grep, ls or process."""
    pattern: str | None
    """What it matches (a command or a path pattern); None matches every call."""
    source: str
    """Who set it: user, project, local or cli."""
    origin: str = ""
    """Exactly where: 'PATH:LINE' for a file, 'command line' for a flag."""


@dataclass
class PermissionsConfig:
    """Permission rules (§5); precedence deny > ask > allow > mode default."""

    allow: list[Rule] = field(default_factory=list)
    """Calls allowed without asking."""
    ask: list[Rule] = field(default_factory=list)
    """Calls that always ask, even where the mode would allow."""
    deny: list[Rule] = field(default_factory=list)
    """Calls refused in every mode."""


@dataclass
class ContextConfig:
    """Context pressure (§7)."""

    auto_compact_at: float = 0.92
    """Fraction of the context window at which compaction starts (0 < x ≤ 1)."""


@dataclass
class BashConfig:
    """The bash tool."""

    timeout: float = 120.0
    """Seconds before a command's process group is killed."""


@dataclass
class ToolOutputConfig:
    """Bounds on tool output."""

    max_inline: int = 30_000
    """Characters of output given to the model before the rest is spilled to a file."""
    cap_total: int = 1 << 30
    """Bytes of session artifacts (spilled output, process logs, snapshots) in all; least recently used go first."""


@dataclass
class ApiConfig:
    """Model requests and their retries."""

    max_attempts: int = 6
    """Attempts per model request, the first included (≥ 1)."""
    initial_backoff: float = 1.0
    """Seconds before the first retry; doubled on each further retry."""
    max_backoff: float = 30.0
    """Upper bound in seconds of one wait between retries."""
    timeout: float = 600.0
    """Seconds a request may take before it is abandoned."""


@dataclass
class GoalConfig:
    """Settings of the session goal."""

    budget: int = 10
    """Automatic continuations a new goal may use before it pauses."""
    grace_seconds: float = 3.0
    """Seconds between a settled turn and the automatic continuation (typing or Ctrl-C cancels it)."""


@dataclass
class Config:
    """Every setting of a KHAELOR run: defaults, then what the files and flags said."""

    model: str = "claude-sonnet-5-5"
    """The model id sent to the API."""
    max_tokens: int = 16_000
    """Upper bound of output tokens per model response."""
    permission_mode: str = "default"
    """default, accept-edits, plan or bypass."""
    permissions: PermissionsConfig = field(default_factory=PermissionsConfig)
    """Permission rules of every source, in load order."""
    context: ContextConfig = field(default_factory=ContextConfig)
    """Context-pressure settings."""
    bash: BashConfig = field(default_factory=BashConfig)
    """Bash tool settings."""
    tool_output: ToolOutputConfig = field(default_factory=ToolOutputConfig)
    """Tool output bounds."""
    api: ApiConfig = field(default_factory=ApiConfig)
    """Model request settings."""
    goal: GoalConfig = field(default_factory=GoalConfig)
    """Session goal settings."""
    pricing: dict[str, ModelPrice] = field(default_factory=dict)
    """Price entries by model id that replace or add to the built-in table."""
    session_dir: Path | None = None
    """Where sessions are stored; None means under the data root."""
    max_cost: float | None = None
    """Cost ceiling of a session in USD; no new model call is made once it cannot be shown to be under it."""
    sources: list[Path] = field(default_factory=list)
    """The config files found and loaded, in merge order (not a setting)."""

    def rules(self, kind: str) -> list[Rule]:
        """The allow, ask or deny rules, in load order."""
        if kind not in RULE_KINDS:
            raise ValueError(f"rule kind must be one of {', '.join(RULE_KINDS)}, not {kind!r}")
        return list(getattr(self.permissions, kind))


def config_files(env: Env, workspace: Path) -> list[tuple[str, Path]]:
    """The config files in merge order, with their source names."""
    return [
        ("user", env.home / "config.yaml"),
        ("project", workspace / ".khaelor" / "config.yaml"),
        ("local", workspace / ".khaelor" / "config.local.yaml"),
    ]


def load_config(env: Env, workspace: Path, overrides: Mapping | None = None) -> Config:
    """Defaults, merged with the user, project and local files, then `overrides` from flags."""
    config, home = Config(), env.environ.get("HOME")
    for source, path in config_files(env, workspace):
        document = read_yaml(path)
        if document is None:
            continue
        config.sources.append(path)
        if document.data is not None and not isinstance(document.data, Mapping):
            raise ConfigError(f"{path}: expected a mapping of settings")
        _apply(config, document.data, _At((), document.where, source, path.parent, home))
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(f"{COMMAND_LINE}: expected a mapping of settings")
    _apply(config, overrides, _At((), lambda keys: COMMAND_LINE, "cli", env.cwd, home))
    return config


@dataclass
class YamlDocument:
    """Plain data from one YAML file, with the line of every key and list item."""

    path: Path
    """The file it came from."""
    data: object
    """dicts, lists and scalars as the safe loader builds them; None for an empty file."""
    lines: dict[tuple, int] = field(default_factory=dict)
    """1-based line of each key path, e.g. ('permissions', 'allow', 0)."""

    def where(self, keys: tuple) -> str:
        """'PATH:LINE' of the deepest known part of `keys`, or just PATH."""
        for end in range(len(keys), 0, -1):
            line = self.lines.get(keys[:end])
            if line:
                return f"{self.path}:{line}"
        return str(self.path)


def read_yaml(path: Path) -> YamlDocument | None:
    """The document at `path`, None if there is no such file; ConfigError if unreadable or invalid."""
    text = _read_text(path)
    if text is None:
        return None
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _invalid_yaml(path, exc) from None
    document = YamlDocument(path, None)
    if root is not None:
        document.data = _Builder(document).build(root, (), 0)
    return document


# --- validation ------------------------------------------------------------


@dataclass(frozen=True)
class _At:
    """A place in the settings being validated, and how to name it in an error."""

    keys: tuple
    locate: Callable[[tuple], str]
    source: str
    base: Path
    home: str | None

    def child(self, key) -> "_At":
        return replace(self, keys=self.keys + (key,))

    @property
    def name(self) -> str:
        return _dotted(self.keys)

    @property
    def where(self) -> str:
        return self.locate(self.keys)

    def error(self, problem: str) -> ConfigError:
        return ConfigError(f"{self.where}: '{self.name}' {problem}")

    def wrong_type(self, expected: str, value) -> ConfigError:
        return self.error(f"must be {expected}, not {_describe(value)}")

    def wrong_value(self, expected: str, value) -> ConfigError:
        return self.error(f"must be {expected}, not {_show(value)}")


def _apply(target, data, at: _At) -> None:
    """Validate `data` against the dataclass `target` and merge it in."""
    if data is None:
        return
    if not isinstance(data, Mapping):
        raise at.wrong_type("a mapping", data)
    sections = {f.name for f in fields(target) if is_dataclass(getattr(target, f.name))}
    for key, value in data.items():
        here = at.child(key)
        if key in sections:
            _apply(getattr(target, key), value, here)
        elif here.name in _CHECKS:
            _merge(target, key, _CHECKS[here.name](value, here), here.name)
        else:
            close = difflib.get_close_matches(here.name, _KNOWN_KEYS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{here.where}: unknown key '{here.name}'{hint}")


def _merge(target, key: str, value, name: str) -> None:
    if name in _ACCUMULATED:
        getattr(target, key).extend(value)
    elif name in _REPLACED_PER_ENTRY:
        getattr(target, key).update(value)
    else:
        setattr(target, key, value)


def _number(*, above=None, at_least=None, at_most=None, integer=False):
    """A check for an int (or, unless `integer`, a float) within bounds; bools are not numbers."""
    kinds, expected = ((int,), "an integer") if integer else ((int, float), "a number")
    limits = [(word, bound) for word, bound in (("greater than", above), ("at least", at_least), ("at most", at_most))
              if bound is not None]

    def check(value, at: _At):
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise at.wrong_type(expected, value)
        if not math.isfinite(value):
            raise at.wrong_value("a finite number", value)
        if ((above is not None and value <= above) or (at_least is not None and value < at_least)
                or (at_most is not None and value > at_most)):
            raise at.wrong_value(" and ".join(f"{word} {_show(bound)}" for word, bound in limits), value)
        return value if integer else float(value)

    return check


def _text(value, at: _At) -> str:
    if not isinstance(value, str):
        raise at.wrong_type("a string", value)
    if not value.strip():
        raise at.wrong_value("a non-empty string", value)
    return value.strip()


def _choice(options: tuple[str, ...]):
    """A check for one of `options`."""
    expected = "one of " + ", ".join(options)

    def check(value, at: _At) -> str:
        if not isinstance(value, str):
            raise at.wrong_type(expected, value)
        if value not in options:
            close = difflib.get_close_matches(value, options, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise at.error(f"must be {expected}, not {_show(value)}{hint}")
        return value

    return check


def _rules(value, at: _At) -> list[Rule]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise at.wrong_type("a list of rules", value)
    return [_rule(item, at.child(index)) for index, item in enumerate(value)]


def _rule(item, at: _At) -> Rule:
    """`bash`, `"bash: git log *"` or `{bash: "git log *"}` → Rule."""
    if isinstance(item, str):
        tool, colon, pattern = item.partition(":")
        pattern = pattern if colon else None
    elif isinstance(item, Mapping) and len(item) == 1:
        ((tool, pattern),) = item.items()
        if not isinstance(pattern, str):
            raise at.child(tool).wrong_type("a pattern string", pattern)
    else:
        raise at.wrong_type("a rule such as 'bash' or 'bash: git log *'", item)
    tool = tool.strip() if isinstance(tool, str) else tool
    if tool not in TOOLS:
        close = difflib.get_close_matches(str(tool), TOOLS, n=1)
        hint = f"did you mean '{close[0]}'?" if close else "tools are " + ", ".join(TOOLS)
        raise at.error(f"names unknown tool {_show(tool)} ({hint})")
    if pattern is not None and not pattern.strip():
        raise at.error(f"has an empty pattern; write just '{tool}' to match every {tool} call")
    return Rule(tool, pattern.strip() if pattern else None, at.source, at.where)


def _prices(value, at: _At) -> dict[str, ModelPrice]:
    return parse_prices(value, at.locate, at.keys)


def _path(value, at: _At) -> Path | None:
    """A path string: `~` expanded, relative to the file's directory (or the cwd for flags)."""
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise at.wrong_type("a path string", value)
    if not value.strip():
        raise at.wrong_value("a non-empty path", value)
    if at.home and (value == "~" or value.startswith("~/")):
        path = Path(at.home) / value[2:]
    else:
        path = Path(value).expanduser()
    return path if path.is_absolute() else at.base / path


_CHECKS: dict[str, Callable] = {
    "model": _text,
    "max_tokens": _number(above=0, integer=True),
    "permission_mode": _choice(PERMISSION_MODES),
    "permissions.allow": _rules,
    "permissions.ask": _rules,
    "permissions.deny": _rules,
    "context.auto_compact_at": _number(above=0, at_most=1),
    "bash.timeout": _number(above=0),
    "tool_output.max_inline": _number(above=0, integer=True),
    "tool_output.cap_total": _number(above=0, integer=True),
    "api.max_attempts": _number(at_least=1, integer=True),
    "api.initial_backoff": _number(at_least=0),
    "api.max_backoff": _number(at_least=0),
    "api.timeout": _number(above=0),
    "pricing": _prices,
    "session_dir": _path,
    "max_cost": _number(above=0),
    "goal.budget": _number(at_least=1, integer=True),
    "goal.grace_seconds": _number(at_least=0),
}
_ACCUMULATED = {"permissions.allow", "permissions.ask", "permissions.deny"}
_REPLACED_PER_ENTRY = {"pricing"}
_KNOWN_KEYS = sorted(set(_CHECKS) | {key.split(".")[0] for key in _CHECKS})


# --- the YAML edge -----------------------------------------------------------


def _read_text(path: Path) -> str | None:
    """The file's text, None if it does not exist; bounded, UTF-8, regular files only."""
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigError(f"{path}: cannot read config: broken symbolic link") from None
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{path}: cannot read config: it is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: cannot read config: not a regular file")
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: cannot read config: larger than {MAX_FILE_BYTES // (1 << 20)} MiB")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read config: not valid UTF-8 (byte {exc.start})") from None


def _invalid_yaml(path: Path, exc: "yaml.YAMLError") -> ConfigError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    if context and problem.startswith("but "):
        problem = f"{context}, {problem}"
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    return ConfigError(f"{where}: invalid YAML: {' '.join(problem.split())}")


class _Builder:
    """Walks a composed node tree into plain data, recording the line of every key."""

    def __init__(self, document: YamlDocument):
        import yaml

        self.document = document
        self.loader = yaml.SafeLoader("")
        self.nodes = 0

    def build(self, node: "yaml.Node", keys: tuple, depth: int):
        import yaml

        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH:
            raise self.error(node, "nested too deeply or too large (recursive alias?)")
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, keys, depth)
        if isinstance(node, yaml.SequenceNode):
            self.expect_tag(node, "tag:yaml.org,2002:seq")
            items = []
            for index, item in enumerate(node.value):
                self.document.lines[keys + (index,)] = item.start_mark.line + 1
                items.append(self.build(item, keys + (index,), depth + 1))
            return items
        return self.scalar(node)

    def mapping(self, node: "yaml.MappingNode", keys: tuple, depth: int) -> dict:
        import yaml

        self.expect_tag(node, "tag:yaml.org,2002:map")
        result = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                raise self.error(key_node, "only plain keys are supported (no merge keys or complex keys)")
            key = self.scalar(key_node)
            here = keys + (key,)
            if key in result:
                raise self.error(key_node, f"duplicate key '{_dotted(here)}'", column=False)
            self.document.lines[here] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, here, depth + 1)
        return result

    def scalar(self, node: "yaml.Node"):
        import yaml

        try:
            return self.loader.construct_object(node)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise self.error(node, f"invalid YAML: {problem}") from None

    def expect_tag(self, node: "yaml.Node", tag: str) -> None:
        if node.tag != tag:
            raise self.error(node, f"invalid YAML: unsupported tag {node.tag!r}")

    def error(self, node: "yaml.Node", problem: str, column: bool = True) -> ConfigError:
        mark = node.start_mark
        where = f"{self.document.path}:{mark.line + 1}" + (f":{mark.column + 1}" if column else "")
        return ConfigError(f"{where}: {' '.join(problem.split())}")


def _dotted(keys: tuple) -> str:
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) and not isinstance(key, bool) else (f".{key}" if text else str(key))
    return text


def _describe(value) -> str:
    """'str ('abc')', 'bool (true)', 'null', 'mapping' — the YAML type and, for scalars, the value."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, list):
        return "list"
    return f"{type(value).__name__} ({_show(value)})"


def _show(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."
