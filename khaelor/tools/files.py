"""The file tools: `read`, `write` and `edit`.

Owns how a file is shown to the model (numbered like `cat -n`, long lines cut,
bounded by `ctx.max_inline`) and the tool side of file-state tracking (SPEC
§6): every successful read is journaled as `file_read` with the whole file's
hash and noted in `ctx.file_state`; writing over an existing file and every
edit require the version last read or written, and every change is journaled
as `file_modified` with the hashes before and after. Files are UTF-8 text; a
file with a NUL in its first 8 KiB, or not valid UTF-8, is binary and refused.
"""

import stat
from pathlib import Path

from khaelor.filestate import FileVersion, StaleFile, observe
from khaelor.tools.base import Tool, ToolContext, ToolError

MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_LINE_CHARS = 2000
DEFAULT_LIMIT = 2000
BINARY_PROBE = 8192
FOOTER_ROOM = 120
"""Characters of `max_inline` kept free for the note saying where to continue."""


def path_arg(ctx: ToolContext, args: dict, name: str = "path", default: str | None = None) -> Path:
    """The resolved path argument `name` (or `default` when absent)."""
    raw = args.get(name, default)
    if raw is None:
        raise ToolError(f"{name} is required")
    if not isinstance(raw, str) or not raw or "\0" in raw:
        raise ToolError(f"{name} must be a non-empty string without NUL characters, got {raw!r}")
    return ctx.resolve(raw)


def shown(ctx: ToolContext, path: Path) -> str:
    """`path` relative to the workspace when inside it, else absolute."""
    try:
        return path.relative_to(ctx.workspace).as_posix() or "."
    except ValueError:
        return str(path)


def _str_arg(args: dict, name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _int_arg(args: dict, name: str, default: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise ToolError(f"{name} must be at least 1, got {value}")
    return value


def load(path: Path) -> bytes:
    """The bytes of the regular file `path` (at most 50 MiB); every failure as a ToolError."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"file not found: {path}") from None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path} is a directory, not a file — use ls")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{path} is not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise ToolError(f"{path} is {st.st_size} bytes; files over 50 MiB are not read — use bash (head, sed -n)")
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror}") from None


def as_text(data: bytes) -> str | None:
    """`data` decoded as UTF-8, or None when it is binary."""
    if b"\0" in data[:BINARY_PROBE]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def split_lines(text: str) -> list[str]:
    """Lines as `cat -n` counts them: split at \\n, no empty line after a final newline."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def run_read(ctx: ToolContext, args: dict) -> str:
    """Show a text file numbered like `cat -n`, from `offset`, at most `limit` lines."""
    path = path_arg(ctx, args)
    offset = _int_arg(args, "offset", 1)
    limit = _int_arg(args, "limit", DEFAULT_LIMIT)
    data = load(path)
    text = as_text(data)
    if text is None:
        raise ToolError(f"{shown(ctx, path)}: binary file ({len(data)} bytes) — not shown")
    if data:
        view = number_lines(split_lines(text), offset, limit, ctx.max_inline)
    else:
        view = f"{shown(ctx, path)} is empty (0 bytes)"
    version = _observe(path, data)
    ctx.record("file_read", version.as_record())
    ctx.file_state.note(version)
    return view


def _observe(path: Path, data: bytes) -> FileVersion:
    try:
        return observe(path, data)
    except OSError as exc:
        raise ToolError(f"cannot stat {path}: {exc.strerror}") from None


def number_lines(lines: list[str], offset: int, limit: int, budget: int) -> str:
    """Lines `offset`…`offset+limit-1` numbered, within `budget` characters, ending with where to continue."""
    total = len(lines)
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of the file ({total} lines)")
    end = min(offset - 1 + limit, total)
    rows: list[str] = []
    used = 0
    for number in range(offset, end + 1):
        row = f"{number:>6}\t{_cut(lines[number - 1])}"
        if used + len(row) + 1 > budget - FOOTER_ROOM:
            if rows:
                rows.append(f"[output bounded at {budget} characters; continue with offset={number}]")
                return "\n".join(rows)
            row = row[: max(budget - FOOTER_ROOM, 20)]
        rows.append(row)
        used += len(row) + 1
    if end < total:
        rows.append(f"[lines {offset}–{end} of {total}; continue with offset={end + 1}]")
    return "\n".join(rows)


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}… [line cut: {len(line) - MAX_LINE_CHARS} more characters]"


def current_sha256(ctx: ToolContext, path: Path) -> str | None:
    """The hash of the existing file at `path` if it is the version last read or written; None if absent."""
    if path.is_dir():
        raise ToolError(f"{path} is a directory, not a file")
    if not path.exists():
        return None
    try:
        return ctx.file_state.require_current(path).sha256
    except StaleFile as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"cannot stat {path}: {exc.strerror}") from None


def store(ctx: ToolContext, path: Path, data: bytes, before: str | None) -> None:
    """Write `data` to `path`, journal the change as `file_modified` and note the new version."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror}") from None
    version = _observe(path, data)
    ctx.record("file_modified", {"call_id": ctx.call_id, "before": before, **version.as_record()})
    ctx.file_state.note(version)


def _encode(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError(f"{name} is not valid Unicode (lone surrogate)") from None


def run_write(ctx: ToolContext, args: dict) -> str:
    """Create or overwrite a file; overwriting needs the current version to have been read."""
    path = path_arg(ctx, args)
    data = _encode(_str_arg(args, "content"), "content")
    before = current_sha256(ctx, path)
    store(ctx, path, data, before)
    return f"Wrote {len(data)} bytes to {shown(ctx, path)} ({'overwrote' if before else 'created'})"


def run_edit(ctx: ToolContext, args: dict) -> str:
    """Replace `old_string` by `new_string` (exactly once unless `replace_all`); a diff follows."""
    path = path_arg(ctx, args)
    old, new = _str_arg(args, "old_string"), _str_arg(args, "new_string")
    replace_all = args.get("replace_all", False)
    if not isinstance(replace_all, bool):
        raise ToolError(f"replace_all must be true or false, got {replace_all!r}")
    if not old:
        raise ToolError("old_string must not be empty")
    if old == new:
        raise ToolError("old_string and new_string are identical — nothing to change")
    before = current_sha256(ctx, path)
    if before is None:
        raise ToolError(f"file not found: {path} — use write to create it")
    text = as_text(data := load(path))
    if text is None:
        raise ToolError(f"{shown(ctx, path)} is a binary file ({len(data)} bytes) — edit works on UTF-8 text")
    after, count = _replace(text, old, new, replace_all, shown(ctx, path))
    store(ctx, path, _encode(after, "new_string"), before)
    summary = f"Edited {shown(ctx, path)}: {count} replacement{'s' if count > 1 else ''}"
    return f"{summary}\n{unified_diff(text, after, shown(ctx, path), ctx.max_inline - len(summary) - 1)}"


def _replace(text: str, old: str, new: str, replace_all: bool, label: str) -> tuple[str, int]:
    count = text.count(old)
    if count == 0:
        raise ToolError(f"old_string not found in {label}")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {label} — give more context to make it unique, or set replace_all"
        )
    return text.replace(old, new), count


def unified_diff(before: str, after: str, label: str, budget: int) -> str:
    """A unified diff (3 lines of context) of two texts, cut to `budget` characters."""
    import difflib

    lines = difflib.unified_diff(_diff_lines(before), _diff_lines(after), f"a/{label}", f"b/{label}", n=3)
    diff = "".join(line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines)
    if len(diff) <= budget:
        return diff.rstrip("\n")
    keep = max(budget - FOOTER_ROOM, 0)
    return f"{diff[:keep]}\n[… diff cut: {len(diff) - keep} more characters]"


def _diff_lines(text: str) -> list[str]:
    lines = [f"{line}\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


READ = Tool(
    name="read",
    description=(
        "Read a UTF-8 text file. Lines are numbered like cat -n; long lines and long output are cut, "
        "with a note giving the offset to continue from. Binary files are refused."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, absolute or relative to the workspace."},
            "offset": {"type": "integer", "minimum": 1, "description": "First line to show (1-based; default 1)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to show (default 2000)."},
        },
        "required": ["path"],
    },
    run=run_read,
    mutates=False,
)

WRITE = Tool(
    name="write",
    description=(
        "Create a file, or overwrite one you have read in its current version. "
        "Missing parent directories are created. Prefer edit for changes to existing files."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, absolute or relative to the workspace."},
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
    },
    run=run_write,
    mutates=True,
)

EDIT = Tool(
    name="edit",
    description=(
        "Replace an exact string in a file you have read in its current version. old_string must "
        "occur exactly once unless replace_all is true. Returns a unified diff."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, absolute or relative to the workspace."},
            "old_string": {"type": "string", "description": "Exact text to replace, whitespace included."},
            "new_string": {"type": "string", "description": "Replacement text; must differ from old_string."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
        },
        "required": ["path", "old_string", "new_string"],
    },
    run=run_edit,
    mutates=True,
)
