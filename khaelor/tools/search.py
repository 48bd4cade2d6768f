"""The search tools: `glob`, `grep` and `ls`.

Owns walking a tree the way git sees it: `.gitignore` files at the searched
directory, in its subdirectories and in its parents up to the repository root
are honoured (the deeper file wins, as in git), and `.git/` is always skipped.
`grep` uses ripgrep when it is on PATH and a Python walk otherwise; both give
`relpath:line:text`. Every listing is bounded and says how much it left out;
names holding control characters (a newline in a file name) are shown quoted,
so one line is always one entry.
"""

import os
import re
import stat
import subprocess
from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from threading import Event

from khaelor.errors import Cancelled
from khaelor.tools.base import Tool, ToolContext, ToolError
from khaelor.tools.files import as_text, path_arg, split_lines
from khaelor.tools.shell import create_private_file, spawn, wait_child

MAX_GLOB_RESULTS = 1000
MAX_LS_ENTRIES = 1000
MAX_GREP_LINES = 500
MAX_GREP_LINE_CHARS = 500
MAX_GREP_FILE_BYTES = 10 * 1024 * 1024
GREP_TIMEOUT = 60.0
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def quoted(name: str) -> str:
    """`name` as is, or as a Python string literal when it holds control characters."""
    return repr(name) if CONTROL.search(name) else name


def _directory(ctx: ToolContext, args: dict) -> Path:
    root = path_arg(ctx, args, default=str(ctx.workspace))
    if not root.exists():
        raise ToolError(f"directory not found: {root}")
    if not root.is_dir():
        raise ToolError(f"{root} is not a directory")
    return root


class Ignores:
    """The `.gitignore` rules in force in one directory: (base directory, spec) pairs, deepest first."""

    def __init__(self, rules: list[tuple[Path, object]]):
        self.rules = rules

    @classmethod
    def above(cls, root: Path) -> "Ignores":
        """The rules of `root` and of its parents up to the enclosing git repository's top."""
        chain = [root]
        top = next((d for d in [root, *root.parents] if (d / ".git").exists()), None)
        if top is not None:
            chain = [d for d in [root, *root.parents] if d == top or top in d.parents]
        return cls([rule for d in chain for rule in _load_gitignore(d)])

    def below(self, directory: Path) -> "Ignores":
        """The rules in force inside `directory`, a child of where these apply."""
        own = _load_gitignore(directory)
        return Ignores(own + self.rules) if own else self

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Whether git would ignore `path`."""
        for base, spec in self.rules:
            rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            verdict = spec.check_file(rel).include
            if verdict is not None:
                return verdict
        return False


def _load_gitignore(directory: Path) -> list[tuple[Path, object]]:
    try:
        text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    import pathspec  # not at import: 45 ms

    return [(directory, pathspec.GitIgnoreSpec.from_lines(text.splitlines()))]


def walk_files(root: Path, cancel: Event | None = None) -> Iterator[Path]:
    """Every non-directory under `root` git would not ignore, in path order; `.git/` skipped."""
    stack = [(_entries(root), Ignores.above(root))]
    while stack:
        entries, ignores = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if cancel is not None and cancel.is_set():
            raise Cancelled()
        is_dir = entry.is_dir(follow_symlinks=False)
        if entry.name == ".git" or ignores.ignored(Path(entry.path), is_dir):
            continue
        if is_dir:
            stack.append((_entries(Path(entry.path)), ignores.below(Path(entry.path))))
        else:
            yield Path(entry.path)


def _entries(directory: Path) -> Iterator[os.DirEntry]:
    try:
        with os.scandir(directory) as found:
            return iter(sorted(found, key=lambda e: e.name))
    except OSError:
        return iter(())


def _glob_match(parts: list[str], pattern: list[str]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_glob_match(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _glob_match(parts[1:], pattern[1:])


def glob_files(root: Path, pattern: str, cancel: Event | None = None) -> list[Path]:
    """Files under `root` matching `pattern`, newest first.

    `*`, `?` and `[…]` match within one name, `**` any number of directories.
    """
    segments = [s for s in pattern.split("/") if s not in ("", ".")]
    found = [p for p in walk_files(root, cancel) if _glob_match(p.relative_to(root).parts, segments)]
    return sorted(found, key=lambda p: (-_mtime(p), str(p)))


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0


def run_glob(ctx: ToolContext, args: dict) -> str:
    """List files matching a glob pattern, newest first."""
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern.strip("/"):
        raise ToolError("pattern must be a non-empty string such as **/*.py")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ToolError("pattern must be relative to path (no leading / or ..)")
    root = _directory(ctx, args)
    found = glob_files(root, pattern, ctx.cancel)
    if not found:
        return "no files match"
    lines = [quoted(p.relative_to(root).as_posix()) for p in found[:MAX_GLOB_RESULTS]]
    if len(found) > MAX_GLOB_RESULTS:
        lines.append(f"… {len(found) - MAX_GLOB_RESULTS} more")
    return "\n".join(lines)


def run_ls(ctx: ToolContext, args: dict) -> str:
    """List a directory: subdirectories with `/`, symlinks with their target; hidden entries included."""
    root = _directory(ctx, args)
    try:
        with os.scandir(root) as found:
            entries = sorted(found, key=lambda e: e.name)
    except OSError as exc:
        raise ToolError(f"cannot list {root}: {exc.strerror}") from None
    if not entries:
        return "(empty directory)"
    lines = [_ls_line(e) for e in entries[:MAX_LS_ENTRIES]]
    if len(entries) > MAX_LS_ENTRIES:
        lines.append(f"… {len(entries) - MAX_LS_ENTRIES} more")
    lines.append(f"({len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, hidden ones included)")
    return "\n".join(lines)


def _ls_line(entry: os.DirEntry) -> str:
    name = quoted(entry.name)
    if entry.is_symlink():
        try:
            return f"{name} -> {quoted(os.readlink(entry.path))}"
        except OSError:
            return f"{name}@"
    return f"{name}/" if entry.is_dir(follow_symlinks=False) else name


def grep_lines(
    ctx: ToolContext, pattern: str, target: Path, glob: str | None = None, use_rg: bool | None = None
) -> tuple[list[str], int]:
    """The first `MAX_GREP_LINES` `relpath:line:text` matches under `target`, and how many there are.

    `use_rg` None means "ripgrep when on PATH"; False forces the Python
    fallback. A single file is always searched in Python: rg would print a
    note instead of skipping it when it is binary.
    """
    if use_rg is None:
        import shutil

        use_rg = shutil.which("rg") is not None
    if use_rg and target.is_dir():
        hits = _rg_hits(ctx, pattern, target, glob)
    else:
        hits = _python_hits(ctx, pattern, target, glob)
    shown: list[str] = []
    total = 0
    for line in hits:
        total += 1
        if total <= MAX_GREP_LINES:
            shown.append(line)
    return shown, total


def _rg_hits(ctx: ToolContext, pattern: str, root: Path, glob: str | None) -> Iterator[str]:
    argv = ["rg", "--line-number", "--no-heading", "--color", "never", "--with-filename", "--null"]
    argv += ["--no-messages", "--sort", "path", "--hidden", "--no-require-git", "--glob", "!.git"]
    argv += ["--glob", glob] if glob else []
    argv += ["-e", pattern]
    spill, out = create_private_file(ctx.tool_output_dir, f"{ctx.call_id or 'grep'}-rg")
    try:
        with out:
            proc = spawn(argv, root, out, subprocess.PIPE)
        timed_out = wait_child(proc, ctx, GREP_TIMEOUT)
        errors = " ".join(proc.stderr.read().decode("utf-8", errors="replace").split())
        proc.stderr.close()
        if timed_out:
            raise ToolError(f"grep timed out after {GREP_TIMEOUT:g}s")
        if proc.returncode not in (0, 1) and not spill.stat().st_size:
            raise ToolError(f"rg failed: {errors or f'exit code {proc.returncode}'}")
        yield from _rg_records(spill)
    finally:
        spill.unlink(missing_ok=True)


def _rg_records(spill: Path) -> Iterator[str]:
    """Parse rg's `path\\0line:text\\n` records; a path may hold newlines, text cannot."""
    with open(spill, "rb") as handle:
        pending = b""
        for raw in handle:
            pending += raw
            if b"\0" in pending:
                name, _, rest = pending.partition(b"\0")
                yield _match_line(_decode(name), _decode(rest.rstrip(b"\n")))
                pending = b""


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _match_line(name: str, numbered_text: str) -> str:
    if len(numbered_text) > MAX_GREP_LINE_CHARS:
        numbered_text = f"{numbered_text[:MAX_GREP_LINE_CHARS]}… [line cut]"
    return f"{quoted(name)}:{numbered_text}"


def _python_hits(ctx: ToolContext, pattern: str, target: Path, glob: str | None) -> Iterator[str]:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"invalid regex {pattern!r}: {exc}") from None
    if target.is_dir():
        files = (p for p in walk_files(target, ctx.cancel) if _glob_selects(glob, p.relative_to(target)))
        base = target
    else:
        files, base = iter([target]), target.parent
    for path in files:
        name = path.relative_to(base).as_posix()
        yield from (_match_line(name, hit) for hit in _search_file(path, regex))


def _glob_selects(glob: str | None, rel: Path) -> bool:
    """rg's `--glob` semantics: gitignore-style, `!` excludes."""
    if not glob:
        return True
    import pathspec

    negated = glob.startswith("!")
    hit = pathspec.GitIgnoreSpec.from_lines([glob.removeprefix("!")]).match_file(rel.as_posix())
    return hit != negated


def _search_file(path: Path, regex: re.Pattern) -> Iterator[str]:
    """`line:text` for each matching line of a regular, non-binary, not too large file."""
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_GREP_FILE_BYTES:
            return
        data = path.read_bytes()
    except OSError:
        return
    if b"\0" in data[:8192]:
        return
    text = as_text(data) or data.decode("utf-8", errors="replace")
    for number, line in enumerate(split_lines(text), 1):
        if regex.search(line):
            yield f"{number}:{line.rstrip(chr(13))}"


def run_grep(ctx: ToolContext, args: dict) -> str:
    """Search file contents for a regular expression."""
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        raise ToolError("pattern must be a non-empty regular expression")
    glob = args.get("glob")
    if glob is not None and (not isinstance(glob, str) or not glob):
        raise ToolError("glob must be a non-empty string such as *.py")
    target = path_arg(ctx, args, default=str(ctx.workspace))
    if not target.exists():
        raise ToolError(f"path not found: {target}")
    shown, total = grep_lines(ctx, pattern, target, glob)
    if not shown:
        return "no matches"
    if total > len(shown):
        shown.append(f"… {total - len(shown)} more matching lines")
    return "\n".join(shown)


GLOB = Tool(
    name="glob",
    description=(
        "Find files by name pattern, e.g. **/*.py or src/*.ts (* and ? stay within one directory, "
        "** spans directories). Honours .gitignore; newest files first; paths relative to path."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern relative to path."},
            "path": {"type": "string", "description": "Directory to search (default: the workspace)."},
        },
        "required": ["pattern"],
    },
    run=run_glob,
    mutates=False,
)

GREP = Tool(
    name="grep",
    description=(
        "Search file contents with a regular expression; prints path:line:text for each matching "
        "line. Honours .gitignore and skips binary files."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for."},
            "path": {"type": "string", "description": "File or directory to search (default: the workspace)."},
            "glob": {"type": "string", "description": "Only search files matching this glob, e.g. *.py."},
        },
        "required": ["pattern"],
    },
    run=run_grep,
    mutates=False,
)

LS = Tool(
    name="ls",
    description=(
        "List a directory's entries, hidden ones included: directories end with /, "
        "symlinks show -> target."
    ),
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Directory (default: the workspace)."}},
        "required": [],
    },
    run=run_ls,
    mutates=False,
)
