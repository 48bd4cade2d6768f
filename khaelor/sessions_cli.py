"""`khaelor sessions SUBCOMMAND …`: managing stored sessions from the shell (SPEC §2).

Each subcommand is one row of `COMMANDS`: a name, a one-line help, a function
that adds its arguments to its parser, and a function that runs it with the
parsed arguments and a `Context` (the environment, the workspace, the store,
output helpers). Adding a subcommand is two small functions and one row.

Errors are `KhaelorError`s, printed by `khaelor.cli` as one line with a hint;
argument mistakes are usage errors (exit 2). Nothing here prints a traceback.
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from khaelor.env import Env
from khaelor.errors import ExitStatus, UsageError
from khaelor.journal import exclusive


@dataclass
class Context:
    """What a subcommand may use."""

    env: Env
    session_dir: str | None = None
    _config: object = None

    @property
    def workspace(self) -> Path:
        # As khaelor.runtime.workspace_of/make_store, without importing the agent stack runtime pulls in.
        return Path(os.path.realpath(self.env.cwd))

    def config(self):
        """The configuration, with --session-dir applied (loaded once)."""
        from khaelor.config import load_config

        if self._config is None:
            overrides = {"session_dir": self.session_dir} if self.session_dir else {}
            self._config = load_config(self.env, self.workspace, overrides)
        return self._config

    def store(self):
        """The session store the configuration (or --session-dir) names."""
        from khaelor.store import Store

        config = self.config()
        return Store(Path(config.session_dir) if config.session_dir else self.env.home / "sessions", self.env.home)

    def find(self, prefix: str) -> Path:
        """The log of the session whose id starts with `prefix`."""
        return self.store().find(self.workspace, prefix)

    def path(self, raw: str) -> Path:
        """A path argument, relative to the working directory."""
        path = Path(raw).expanduser()
        return path if path.is_absolute() else Path(self.env.cwd) / path

    def say(self, *lines: str) -> None:
        for line in lines:
            self.env.stdout.write(line + "\n")
        self.env.stdout.flush()

    def warn(self, line: str) -> None:
        self.env.stderr.write(f"khaelor: warning: {line}\n")
        self.env.stderr.flush()


@dataclass(frozen=True)
class Command:
    """One `khaelor sessions` subcommand."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Context], int]


# --- export ---------------------------------------------------------------------------------------------------------

def export_arguments(parser: argparse.ArgumentParser) -> None:
    from khaelor.export import FORMATS

    parser.add_argument("id", metavar="ID", help="session id or unique prefix")
    parser.add_argument("--format", choices=FORMATS, help="json (default, or as --output's suffix says), jsonl or html")
    parser.add_argument("--output", metavar="PATH", help="file to write (default: ./<id>.khaelor-session.json etc.)")
    parser.add_argument("--force", action="store_true", help="replace PATH if it exists")
    parser.add_argument("--include-secrets", action="store_true",
                        help="export raw values without redaction (only for a trusted destination)")


def run_export(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor.export import default_output, export_session, format_for_path

    log = ctx.find(args.id)
    fmt = args.format or (format_for_path(Path(args.output), default="json") if args.output else "json")
    output = ctx.path(args.output) if args.output else default_output(log.stem, fmt, Path(ctx.env.cwd))
    if args.include_secrets:
        ctx.warn("--include-secrets: the export holds raw values, including any credential in the session; "
                 "keep it away from anyone you would not give those credentials")
    report = export_session(log, output, fmt, force=args.force, include_secrets=args.include_secrets,
                            clock=ctx.env.clock)
    ctx.say(*report.lines())
    return ExitStatus.SUCCESS


# --- import ---------------------------------------------------------------------------------------------------------

def import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="PATH",
                        help="a KHAELOR export (.json), a KHAELOR log (.jsonl) or a pi v3 session (.jsonl)")


def run_import(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor.importer import import_session

    report = import_session(ctx.path(args.source), ctx.store(), ctx.workspace, ctx.env)
    ctx.say(*report.lines())
    return ExitStatus.SUCCESS


# --- share ----------------------------------------------------------------------------------------------------------

def share_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="session id or unique prefix")
    parser.add_argument("--yes", action="store_true", help="approve publishing the previewed snapshot without a prompt")


def run_share(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor.share import prepare_share, publish_share

    preview = prepare_share(ctx.find(args.id), ctx.env.home, ctx.env.clock)
    ctx.say(*preview.lines())
    if not (args.yes or _confirm(ctx, "Publish exactly this file as an unlisted gist? [y/N] ")):
        ctx.env.stderr.write("khaelor: share cancelled: nothing was published "
                             "(review the file, then approve with --yes or at the prompt)\n")
        return ExitStatus.ERROR
    ctx.say(*publish_share(preview, ctx.env.environ).lines())
    return ExitStatus.SUCCESS


def _confirm(ctx: Context, question: str) -> bool:
    """Ask on the terminal; anything but yes — and no terminal at all — is no."""
    if not ctx.env.stdin_is_tty():
        return False
    ctx.env.stdout.write(question)
    ctx.env.stdout.flush()
    return ctx.env.stdin.readline().strip().lower() in ("y", "yes")


# --- diff -----------------------------------------------------------------------------------------------------------

def diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="session id or unique prefix")
    parser.add_argument("path", metavar="PATH", nargs="?", help="only files under this path")
    parser.add_argument("--stat", action="store_true", help="list the files with line counts, without the diffs")


def run_diff(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor.diffview import print_session_diff

    return print_session_diff(ctx.find(args.id), ctx.store(), ctx.env, args.path, args.stat)


# --- list -----------------------------------------------------------------------------------------------------------

def list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--query", metavar="Q",
                        help='search ids, names, titles, tags, paths and dates: fuzzy words (all must match), '
                             '"a quoted phrase" (exact), or re:REGEX')
    parser.add_argument("--all-workspaces", action="store_true", help="every workspace, not only this one")
    parser.add_argument("--json", action="store_true", help="one JSON array of sessions")


def run_list(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor import catalog, listing

    query = listing.parse_query(args.query) if args.query else None
    store = ctx.store()
    if args.all_workspaces:
        logs, scope = store.all_sessions(), None
    else:
        logs, scope = store.sessions_of(ctx.workspace), [store.workspace_dir(ctx.workspace)]
    found = catalog.summaries(store.root, logs, scope, ctx.config().pricing).sessions
    if query:
        found = [summary for summary in found if listing.matches(query, summary)]
    found.sort(key=lambda summary: (summary.updated or "", summary.id), reverse=True)
    if args.json:
        ctx.say(json.dumps([listing.as_json(summary) for summary in found], ensure_ascii=False, indent=1))
    elif not found:
        ctx.say("no sessions" + (" match" if args.query else "") +
                ("" if args.all_workspaces else " in this workspace (--all-workspaces lists every one)"))
    else:
        now = ctx.env.clock()
        ctx.say(*(listing.line(summary, now, paths=args.all_workspaces) for summary in found))
    return ExitStatus.SUCCESS


# --- inspect --------------------------------------------------------------------------------------------------------

def inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="session id or unique prefix")
    parser.add_argument("--json", action="store_true", help="one JSON object")


def run_inspect(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor import listing

    report = listing.inspect(ctx.find(args.id), ctx.config().pricing)
    if args.json:
        ctx.say(json.dumps(report, ensure_ascii=False, indent=1))
    else:
        ctx.say(*listing.inspect_lines(report))
    return ExitStatus.SUCCESS


# --- rename and tag -------------------------------------------------------------------------------------------------

def rename_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="session id or unique prefix")
    parser.add_argument("name", metavar="NAME", help="the new name")


def run_rename(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor import metadata

    name = " ".join(args.name.split())
    if not name:
        raise UsageError("a session name cannot be empty")
    log = ctx.find(args.id)
    metadata.save(log, name, metadata.load(log)["tags"])
    ctx.say(f"{log.stem} named {name!r}" + _journal_note(ctx, log, "rename", name=name))
    return ExitStatus.SUCCESS


def tag_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="session id or unique prefix")
    parser.add_argument("tags", metavar="TAG", nargs="*", help="tags to add")
    parser.add_argument("--remove", metavar="TAG", action="append", default=[], help="a tag to remove (repeatable)")


def run_tag(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor import metadata

    added = [tag.strip() for tag in args.tags]
    if not (added or args.remove):
        raise UsageError("name at least one TAG to add or --remove TAG", hint="khaelor sessions tag ID TAG...")
    if any(not tag or any(ch.isspace() for ch in tag) for tag in added):
        raise UsageError("a tag is one word without spaces")
    log = ctx.find(args.id)
    data = metadata.load(log)
    tags = [tag for tag in data["tags"] if tag not in args.remove]
    tags += [tag for tag in dict.fromkeys(added) if tag not in tags]
    metadata.save(log, data["name"], tags)
    ctx.say(f"{log.stem} tags: " + (", ".join(tags) or "none") + _journal_note(ctx, log, "tag", tags=tags))
    return ExitStatus.SUCCESS


def _journal_note(ctx: Context, log: Path, kind: str, **fields) -> str:
    """Journal a metadata change as an audit record when the log's lock is free; say why not otherwise."""
    from khaelor.errors import JournalError
    from khaelor.journal import Journal

    try:
        journal, _ = Journal.open(log, ctx.env.clock)
    except JournalError as exc:
        return f" (sidecar only, not journaled: {exc.message})"
    try:
        journal.append(kind, **fields)
    finally:
        journal.close()
    return ""


# --- delete, restore, repair ----------------------------------------------------------------------------------------

def id_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID", help="session id or unique prefix")


def run_delete(args: argparse.Namespace, ctx: Context) -> int:
    log = ctx.find(args.id)
    with exclusive(log):
        trashed = ctx.store().trash(log)
    ctx.say(f"{log.stem} moved to the trash: {trashed} (khaelor sessions restore {log.stem} brings it back)")
    return ExitStatus.SUCCESS


def run_restore(args: argparse.Namespace, ctx: Context) -> int:
    store = ctx.store()
    restored = store.restore(store.find_in_trash(ctx.workspace, args.id))
    ctx.say(f"{restored.stem} restored: {restored}")
    return ExitStatus.SUCCESS


def run_repair(args: argparse.Namespace, ctx: Context) -> int:
    log = ctx.find(args.id)
    with exclusive(log):
        ctx.say(_repair(log))
    return ExitStatus.SUCCESS


def _repair(log: Path) -> str:
    """Back up, then cut an interrupted final append; a damaged completed record is reported, never rewritten."""
    import os
    import shutil

    from khaelor.errors import JournalError
    from khaelor.journal import private_dir, read_log

    try:
        contents = read_log(log)
    except JournalError as exc:
        raise JournalError(f"{exc.message}; a completed record is damaged, so the log was left unchanged",
                           hint="nothing was rewritten: export or copy what you need, or delete the session") from None
    if contents.torn_offset is None:
        return f"{log.stem}: nothing to repair ({len(contents.records)} complete records, no torn final line)"
    backup = private_dir(log.parent / ".repair") / f"{log.stem}.{os.getpid()}.{contents.size}.jsonl.bak"
    fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as target, open(log, "rb") as source:
        shutil.copyfileobj(source, target)
        target.flush()
        os.fsync(target.fileno())
    torn = os.stat(log).st_size - contents.torn_offset
    with open(log, "r+b") as handle:
        handle.truncate(contents.torn_offset)
        os.fsync(handle.fileno())
    return (f"{log.stem}: removed an interrupted final append ({torn} bytes at byte {contents.torn_offset}); "
            f"backup: {backup}")


# --- purge, empty-trash, gc ----------------------------------------------------------------------------------------

def run_purge(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor.artifacts import size_text

    store = ctx.store()
    freed = store.purge(_trashed(ctx, args.id))
    ctx.say(f"{freed.sessions[0]} deleted for good: freed {size_text(freed.size)}")
    for problem in freed.problems:
        ctx.warn(problem)
    return ExitStatus.ERROR if freed.problems else ExitStatus.SUCCESS


def _trashed(ctx: Context, prefix: str) -> Path:
    """The trashed log `prefix` names; a live session gets its own clear refusal."""
    try:
        return ctx.store().find_in_trash(ctx.workspace, prefix)
    except UsageError as missing:
        try:
            live = ctx.find(prefix)
        except UsageError:
            raise missing from None
    raise UsageError(f"{live.stem} is not in the trash; purge deletes only trashed sessions",
                     hint=f"khaelor sessions delete {live.stem} moves it to the trash first")


def empty_trash_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all-workspaces", action="store_true", help="every workspace's trash, not only this one's")


def run_empty_trash(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor.artifacts import Freed, size_text

    store = ctx.store()
    trashed = store.all_trashed() if args.all_workspaces else store.trashed_of(ctx.workspace)
    if not trashed:
        ctx.say("the trash is empty" + ("" if args.all_workspaces else
                                        " in this workspace (--all-workspaces empties every one)"))
        return ExitStatus.SUCCESS
    freed = Freed()
    for log in trashed:
        try:
            freed.add(store.purge(log))
        except OSError as exc:
            freed.problems.append(f"could not delete {log}: {exc.strerror or exc}")
    ctx.say(f"deleted {len(freed.sessions)} trashed session(s) for good: freed {size_text(freed.size)}")
    for problem in freed.problems:
        ctx.warn(problem)
    return ExitStatus.ERROR if freed.problems else ExitStatus.SUCCESS


def run_gc(args: argparse.Namespace, ctx: Context) -> int:
    from khaelor.artifacts import collect_garbage
    from khaelor.store import Store

    store = ctx.store()
    # Sessions of the default store share the data root's artifacts even when --session-dir names another one.
    default = Store(ctx.env.home / "sessions", ctx.env.home)
    others = [default] if default.root != store.root else []
    lines, problems = collect_garbage(store, others, ctx.config().tool_output.cap_total)
    ctx.say(*lines)
    for problem in problems:
        ctx.warn(problem)
    return ExitStatus.ERROR if problems else ExitStatus.SUCCESS


def no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


COMMANDS: tuple[Command, ...] = (
    Command("list", "sessions of this workspace (or all), newest first, with age, messages and cost",
            list_arguments, run_list),
    Command("inspect", "a session's title, size, entries, head, checkpoints, usage, cost and branches",
            inspect_arguments, run_inspect),
    Command("rename", "name a session (kept in its sidecar; the log is never rewritten)", rename_arguments,
            run_rename),
    Command("tag", "add tags to a session, or --remove them", tag_arguments, run_tag),
    Command("delete", "move a session to its workspace's trash (recoverable with restore)", id_argument, run_delete),
    Command("restore", "bring a session back from the trash", id_argument, run_restore),
    Command("purge", "delete a trashed session for good, with its goal and artifacts", id_argument, run_purge),
    Command("empty-trash", "delete every trashed session of this workspace (or all) for good",
            empty_trash_arguments, run_empty_trash),
    Command("gc", "remove orphaned artifacts, then the least recently used sessions' beyond tool_output.cap_total",
            no_arguments, run_gc),
    Command("repair", "remove an interrupted final append (after a private backup); report damaged records",
            id_argument, run_repair),
    Command("export", "write a session to a file: json, jsonl or a script-free html page (redacted)",
            export_arguments, run_export),
    Command("import", "make a new session from a KHAELOR export or log, or a pi v3 session", import_arguments,
            run_import),
    Command("share", "publish a redacted snapshot as an unlisted gist through gh, after review", share_arguments,
            run_share),
    Command("diff", "what the agent changed in a session, file by file (never anyone else's edits)", diff_arguments,
            run_diff),
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as UsageError and writes help to the injected streams."""

    def __init__(self, *args, env: Env, **kwargs):
        super().__init__(*args, **kwargs)
        self.env = env

    def error(self, message: str):
        raise UsageError(message, hint=f"{self.prog} --help")

    def _print_message(self, message: str, file=None) -> None:
        if message:
            (self.env.stderr if file is sys.stderr else self.env.stdout).write(message)


def build_parser(env: Env, wanted: str | None = None) -> argparse.ArgumentParser:
    """The `khaelor sessions` parser, one subparser per row of COMMANDS.

    With `wanted`, only that subcommand gets its arguments: some argument
    functions import their domain module (export's is slow to import), and a
    listing should not pay for them.
    """
    parser = _Parser(prog="khaelor sessions", description="Manage stored sessions.", env=env)
    parser.add_argument("--session-dir", metavar="PATH", help="session store root (default ~/.khaelor/sessions)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.help, env=env)
        if wanted is None or command.name == wanted:
            command.arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: list[str], env: Env) -> int:
    """Run `khaelor sessions ARGV`; returns the exit status."""
    names = {command.name for command in COMMANDS}
    parser = build_parser(env, next((word for word in argv if word in names), None))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if not getattr(args, "run", None):
        raise UsageError("a subcommand is needed: " + ", ".join(command.name for command in COMMANDS),
                         hint="khaelor sessions --help")
    return int(args.run(args, Context(env, args.session_dir)))
