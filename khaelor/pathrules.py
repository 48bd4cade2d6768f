"""Paths for the permission engine: where a path argument really points, and path rule patterns.

Owns how a path argument becomes a `Target` — the path as written (made
absolute, `~` expanded, `..` folded) and its real path (every symlink
resolved, `..` applied after symlinks as the kernel does) — how a rule
pattern becomes a `PathPattern`, and the places a policy cares about
(`Places`: the workspace, the home directory, the areas where writes always
ask, whether the file system folds case).

Pattern syntax (gitignore, via pathspec): `~/…` from the home directory,
`/…` absolute, `./…` from the workspace root, anything else relative to the
workspace exactly as in a `.gitignore` at its root (`.env` matches at any
depth, `src/**` only under `src`). A pattern naming a directory covers
everything inside it. `!` negation is not allowed in rules.

Invariants: callers match deny and ask rules against both paths of a target
and allow rules against the real path only, so neither a symlink nor `..`
leads around a denied area or out of an allowed one. On a case-folding file
system both sides are compared in lower case.
"""

import functools
import glob
import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from khaelor.shellwords import GLOB, Word

MAX_GLOB_MATCHES = 1000
_GLOB_CHARS = re.compile(r"[*?\[\\]")


@dataclass(frozen=True)
class Target:
    """A path argument resolved: as written (absolute, normalized) and for real."""

    lexical: str
    real: str


@dataclass(frozen=True)
class Places:
    """The directories a policy's decisions depend on."""

    workspace: Path
    """The workspace's real path."""
    home: str
    """The directory `~` stands for."""
    protected: tuple[str, ...]
    """Areas where writes always ask: the workspace's .git and .khaelor, KHAELOR's data root."""
    fold: bool
    """Whether the file system folds case."""

    @classmethod
    def of(cls, workspace: Path, home: Path | None, data_root: Path | None, fold: bool | None) -> "Places":
        real = Path(os.path.realpath(workspace))
        areas = [real / ".git", real / ".khaelor"] + ([Path(data_root)] if data_root else [])
        protected = tuple(dict.fromkeys(p for area in areas for p in (os.path.normpath(area), os.path.realpath(area))))
        home_text = os.path.normpath(str(home or Path.home()))
        return cls(real, home_text, protected, _folds_case(real) if fold is None else fold)

    def target(self, raw: str, base: Path | str | None = None) -> Target:
        """Where `raw` points, relative paths taken from `base` (default: the workspace)."""
        path = os.path.join(base or self.workspace, expand_home(raw, self.home))
        return Target(os.path.normpath(path), os.path.realpath(path))

    def inside(self, target: Target) -> bool:
        """Whether the target really is inside the workspace."""
        return under(target.real, str(self.workspace), self.fold)

    def protected_area(self, target: Target) -> str | None:
        """The protected area the target is in, if any."""
        for area in self.protected:
            if under(target.lexical, area, self.fold) or under(target.real, area, self.fold):
                return area
        return None

    def rule_for(self, tool: str, target: Target) -> str | None:
        """The narrowest rule naming exactly this target, for a 'session' or 'always' grant; None for the workspace itself."""
        kind = "edit" if tool in ("write", "edit") else "read"
        if not self.inside(target):
            return f"{kind}: {_escaped(target.real)}"
        relative = os.path.relpath(target.real, self.workspace)
        return None if relative == "." else f"{kind}: ./{_escaped(relative)}"


def _escaped(path: str) -> str:
    return _GLOB_CHARS.sub(r"\\\g<0>", path)


@dataclass(frozen=True)
class PathPattern:
    """A compiled path rule pattern."""

    bases: tuple[str, ...]
    """The directory the pattern is relative to, as given and real."""
    spec: object
    """The pathspec matcher."""
    areas: tuple[str, ...]
    """The literal directory an anchored pattern starts at (given and real); empty when unanchored."""
    fold: bool

    def matches(self, target: Target, real_only: bool = False) -> bool:
        """Whether the pattern covers the target."""
        paths = (target.real,) if real_only else (target.lexical, target.real)
        return any(self._match(path, base) for path in paths for base in self.bases)

    def _match(self, path: str, base: str) -> bool:
        if self.fold:
            path, base = path.lower(), base.lower()
        if base == "/":
            relative = path[1:]
        elif path.startswith(base + "/"):
            relative = path[len(base) + 1:]
        else:
            return False
        return bool(relative) and self.spec.match_file(relative)

    def inside(self, directory: Target, loose: bool = False) -> bool:
        """Whether the directory holds part of what the pattern covers (`loose`: unanchored patterns too)."""
        paths = (directory.lexical, directory.real)
        if self.areas:
            return any(under(area, path, self.fold) for area in self.areas for path in paths)
        return loose and any(under(p, b, self.fold) or under(b, p, self.fold) for p in paths for b in self.bases)


def expand_home(raw: str, home: str) -> str:
    """`raw` with a leading `~` or `~user` expanded."""
    if raw == "~" or raw.startswith("~/"):
        return home + raw[1:]
    return os.path.expanduser(raw) if raw.startswith("~") else raw


def under(path: str, area: str, fold: bool = False) -> bool:
    """Whether `path` is `area` or inside it."""
    if fold:
        path, area = path.lower(), area.lower()
    return path == area or path.startswith(area.rstrip("/") + "/")


@functools.lru_cache(maxsize=1024)
def path_pattern(pattern: str, places: Places) -> PathPattern:
    """Compile a path rule pattern; ValueError if it is not one."""
    if "\0" in pattern:
        raise ValueError("the pattern contains a NUL character")
    if pattern.startswith("!"):
        raise ValueError("negated patterns (!) are not supported in rules")
    if pattern == "~" or pattern.startswith("~/"):
        base, body = places.home, pattern[1:]
    elif pattern.startswith("/"):
        base, body = "/", pattern
    elif pattern == "." or pattern.startswith("./"):
        base, body = str(places.workspace), pattern[1:]
    else:
        base, body = str(places.workspace), pattern
    if not body.strip("/"):
        body = "/**"
    import pathspec

    try:
        spec = pathspec.GitIgnoreSpec.from_lines([body.lower() if places.fold else body])
    except ValueError as exc:
        raise ValueError(f"not a valid gitignore-style pattern ({exc})") from None
    if not spec.patterns or spec.patterns[0].include is None:
        raise ValueError("the pattern matches nothing")
    bases = tuple(dict.fromkeys((os.path.normpath(base), os.path.realpath(base))))
    return PathPattern(bases, spec, _areas(body, base), places.fold)


def _areas(body: str, base: str) -> tuple[str, ...]:
    if "/" not in body.rstrip("/"):
        return ()
    parts = list(itertools.takewhile(lambda part: not _GLOB_CHARS.search(part), body.strip("/").split("/")))
    area = os.path.join(base, *parts)
    return tuple(dict.fromkeys((os.path.normpath(area), os.path.realpath(area))))


def expand_word(word: Word, places: Places, bases: list[Path]) -> list[Target] | None:
    """The paths a literal or glob word names (relative ones from each base); None if a glob names too many."""
    text = expand_home(word.text, places.home)
    roots = [None] if os.path.isabs(text) else bases
    if word.kind != GLOB:
        return [places.target(text, root) for root in roots]
    targets = []
    for root in roots:
        pattern = os.path.join(root or "", text)
        found = list(itertools.islice(glob.iglob(pattern, include_hidden=True), MAX_GLOB_MATCHES + 1))
        if len(found) > MAX_GLOB_MATCHES:
            return None
        targets += [places.target(path) for path in found or [pattern]]
    return targets


def _folds_case(path: Path) -> bool:
    text = str(path)
    swapped = text.swapcase()
    try:
        return swapped != text and os.path.samefile(text, swapped)
    except OSError:
        return False
