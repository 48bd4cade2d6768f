"""The command line: parse arguments, pick a front end, turn errors into one line.

`main(argv, env)` is the only entry point. It imports nothing heavy: the
`--version` and `--help` paths load neither the SDK nor prompt_toolkit, and
each front end is imported only when chosen. Errors meant for the person are
printed as one line (plus a hint) on stderr; a traceback appears only with
KHAELOR_DEBUG=1.
"""

import argparse
import sys

from khaelor import __version__
from khaelor.env import Env
from khaelor.errors import ExitStatus, KhaelorError, UsageError

DESCRIPTION = "KHAELOR: a terminal-native autonomous engineering agent."
EPILOG = """\
commands:
  khaelor sessions list|inspect|rename|tag|delete|restore|purge|repair|export|import|share|diff|gc|empty-trash ...
                                            manage stored sessions (khaelor sessions --help)
  khaelor doctor                            check the installation, configuration and session store

environment:
  ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN   credentials (the API key wins)
  ANTHROPIC_BASE_URL                        another Anthropic-compatible endpoint
  KHAELOR_HOME                              data root (default ~/.khaelor)
  KHAELOR_DEBUG=1                           show tracebacks of internal errors

exit status: 0 success, 1 task error, 2 usage error, 130 interrupted (143 on SIGTERM)
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}")
    return value


def _positive_usd(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in USD, not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive amount in USD, not {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; also the source the man page is checked against."""
    parser = argparse.ArgumentParser(prog="khaelor", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompt", nargs="?", help="the request (print mode also reads piped standard input)")
    parser.add_argument("-p", "--print", action="store_true", dest="print_mode",
                        help="print mode: run the request to completion, print the result, exit")
    parser.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text",
                        help="print mode output: text (default), json (one result object), "
                             "stream-json (one JSON event a line)")
    parser.add_argument("--max-turns", type=_positive_int, metavar="N", help="stop after N model turns")
    parser.add_argument("--max-cost", type=_positive_usd, metavar="USD",
                        help="cost ceiling of the session in USD: no model call once it cannot be shown to be under it")
    parser.add_argument("--goal", metavar="OBJECTIVE",
                        help="print mode: keep working toward OBJECTIVE until the model reports it complete or "
                             "blocked, or the goal budget is spent")
    parser.add_argument("-c", "--continue", action="store_true", dest="continue_latest",
                        help="resume the most recent session of this workspace")
    parser.add_argument("-r", "--resume", metavar="ID", nargs="?", const="",
                        help="resume the session with this id or unique prefix (the picker without ID)")
    parser.add_argument("--fork", metavar="ID", nargs="?", const="",
                        help="start a new session from the head of the session with this id or prefix "
                             "(the picker without ID); the original is left unchanged")
    parser.add_argument("--session-dir", metavar="PATH", help="session store root (default ~/.khaelor/sessions)")
    parser.add_argument("--model", metavar="MODEL", help="model id; overrides config and the model of a resumed session")
    parser.add_argument("--permission-mode", choices=("default", "accept-edits", "plan", "bypass"),
                        help="permission mode (default: from config, else 'default')")
    parser.add_argument("--allow", action="append", default=[], metavar="RULE",
                        help="allow rule, e.g. --allow bash or --allow 'bash: npm test' (repeatable)")
    parser.add_argument("--deny", action="append", default=[], metavar="RULE",
                        help="deny rule, same form as --allow (repeatable)")
    parser.add_argument("--version", action="version", version=f"khaelor {__version__}")
    return parser


def main(argv: list[str] | None = None, env: Env | None = None) -> int:
    """Run KHAELOR with `argv`; returns the exit status."""
    env = env or Env()
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "sessions":
            from khaelor import sessions_cli

            return sessions_cli.main(argv[1:], env)
        if argv and argv[0] == "doctor":
            from khaelor import doctor

            return doctor.main(argv[1:], env)
        args = build_parser().parse_args(argv)
        return _dispatch(args, env)
    except KhaelorError as exc:
        _print_error(env, exc)
        return int(exc.status)
    except KeyboardInterrupt:
        return int(ExitStatus.INTERRUPTED)
    except OSError as exc:
        if env.debug:
            _print_traceback(env)
        where = f": {exc.filename}" if exc.filename else ""
        env.stderr.write(f"khaelor: error: {exc.strerror or exc}{where}\n")
        return int(ExitStatus.ERROR)
    except Exception as exc:
        if env.debug:
            _print_traceback(env)
        else:
            env.stderr.write(f"khaelor: internal error: {type(exc).__name__}: {exc} "
                             "(set KHAELOR_DEBUG=1 for the traceback)\n")
        return int(ExitStatus.ERROR)


def _dispatch(args: argparse.Namespace, env: Env) -> int:
    chosen = [flag for flag, given in (("--continue", args.continue_latest), ("--resume", args.resume is not None),
                                       ("--fork", args.fork is not None)) if given]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} cannot be used together")
    if args.goal is not None and not args.print_mode:
        raise UsageError("--goal is for print mode; in the REPL use /goal OBJECTIVE")
    if args.print_mode and args.resume == "":
        raise UsageError("print mode needs a session id after --resume", hint="khaelor -p -r ID 'next step'")
    if args.print_mode and args.fork == "":
        raise UsageError("print mode needs a session id after --fork", hint="khaelor -p --fork ID 'next step'")
    from khaelor.runtime import Options

    options = Options(model=args.model, permission_mode=args.permission_mode, session_dir=args.session_dir,
                      allow=tuple(args.allow), deny=tuple(args.deny), continue_latest=args.continue_latest,
                      resume=args.resume, fork=args.fork, max_turns=args.max_turns, max_cost=args.max_cost)
    if args.print_mode:
        from khaelor import printmode

        return printmode.run(printmode.PrintRequest(args.prompt, args.output_format, options, args.goal), env)
    from khaelor import repl

    return repl.run(env, options, args.prompt)


def _print_traceback(env: Env) -> None:
    import traceback  # only under KHAELOR_DEBUG=1, so not imported on every start

    traceback.print_exc(file=env.stderr)


def _print_error(env: Env, exc: KhaelorError) -> None:
    if env.debug:
        _print_traceback(env)
    env.stderr.write(f"khaelor: error: {exc.message}\n")
    if exc.hint:
        env.stderr.write(f"khaelor: hint: {exc.hint}\n")
    env.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
