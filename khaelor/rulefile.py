"""Saving "always allow" answers: allow rules appended to `.khaelor/config.local.yaml`.

Owns the one place KHAELOR writes a configuration file. Invariants:

* a new file is created owner-private (0600); an existing one keeps its mode
  and its settings, and its comments and layout whenever the rules can be
  inserted into its `permissions.allow` list as text;
* the new text must load to exactly the old settings plus the new rules, or
  the settings are written out again in full (comments are then lost);
* the file is replaced atomically (temporary file, fsync, rename), never
  through a symbolic link, and never half-written.
"""

import copy
import json
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

import yaml

from khaelor.errors import ConfigError

LOCAL_CONFIG = Path(".khaelor") / "config.local.yaml"


def save_rules(workspace: Path, rules: Iterable[str]) -> Path:
    """Add allow `rules` to the workspace's local config; returns its path. ConfigError or OSError on failure."""
    rules = list(dict.fromkeys(rules))
    path = workspace / LOCAL_CONFIG
    old_text, mode = _existing(path)
    old = _load(old_text, path)
    expected = _with_rules(old, rules)
    text = _inserted(old_text, [rule for rule in rules if rule not in _allow_list(old)])
    if text is None or _load(text, path) != expected:
        text = yaml.safe_dump(expected, sort_keys=False, allow_unicode=True, default_flow_style=False)
    _replace(path, text, mode)
    return path


def _existing(path: Path) -> tuple[str, int]:
    """The current text and mode of the file ("" and 0600 if there is none)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return "", 0o600
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: not a regular file; not changed")
    try:
        return path.read_text(encoding="utf-8"), stat.S_IMODE(info.st_mode)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid UTF-8; not changed") from None


def _load(text: str, path: Path) -> dict:
    try:
        data = yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML, not changed ({' '.join(str(exc).split())})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings; not changed")
    return data


def _allow_list(data: dict) -> list:
    permissions = data.get("permissions") or {}
    if not isinstance(permissions, dict) or not isinstance(permissions.get("allow") or [], list):
        raise ConfigError("permissions.allow in the local config is not a list; not changed")
    return permissions.get("allow") or []


def _with_rules(data: dict, rules: list[str]) -> dict:
    allow = _allow_list(data)
    result = copy.deepcopy(data)
    permissions = result.get("permissions") or {}
    permissions["allow"] = allow + [rule for rule in rules if rule not in allow]
    result["permissions"] = permissions
    return result


def _inserted(text: str, rules: list[str]) -> str | None:
    """`text` with `rules` written into its allow list as new lines; None when its layout is not a plain block one."""
    if not rules:
        return text
    if text.startswith("\ufeff"):
        return None
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    block = "permissions:\n  allow:\n" + _items(rules, 4)
    if root is None:
        return text + ("\n" if text and not text.endswith("\n") else "") + block
    if not isinstance(root, yaml.MappingNode) or root.flow_style:
        return None
    permissions = _value(root, "permissions")
    if permissions is None:
        return text + ("\n" if not text.endswith("\n") else "") + block
    if not isinstance(permissions, yaml.MappingNode) or permissions.flow_style or not permissions.value:
        return None
    allow = _value(permissions, "allow")
    if allow is None:
        key = permissions.value[0][0].start_mark
        return _insert_line(text, key.index, f"{' ' * key.column}allow:\n" + _items(rules, key.column + 2))
    if not isinstance(allow, yaml.SequenceNode) or allow.flow_style or not allow.value:
        return None
    return _insert_after(text, _last_leaf(allow).end_mark.index, _items(rules, allow.start_mark.column))


def _value(mapping: yaml.MappingNode, key: str):
    return next((value for k, value in mapping.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _last_leaf(node):
    while isinstance(node.value, list) and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    return node


def _items(rules: list[str], indent: int) -> str:
    return "".join(f"{' ' * indent}- {json.dumps(rule)}\n" for rule in rules)


def _insert_line(text: str, index: int, lines: str) -> str:
    """`lines` inserted at the start of the line holding `index`."""
    start = text.rfind("\n", 0, index) + 1
    return text[:start] + lines + text[start:]


def _insert_after(text: str, index: int, lines: str) -> str:
    """`lines` inserted after the line holding `index`."""
    end = text.find("\n", index)
    return text + "\n" + lines if end == -1 else text[:end + 1] + lines + text[end + 1:]


def _replace(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
