"""What a simple command does, as far as permissions care: only read, or change git state.

Owns two judgements on a parsed `Command`: `read_only` (plan mode runs
nothing else) — a small table of commands that cannot write, with the
options that would make them write (`sort -o`, `find -delete`, `git log
--output` …) — and `git_mutation` (the git rule: always ask), which holds
for every git subcommand not known to only read or to leave history alone,
so aliases and `git -c …` count as mutations. Both look at the innermost
command; a wrapper that changes privileges (`sudo`) makes nothing read-only.
"""

import os

from khaelor.shellwords import Command, Word


READS_ONLY = frozenset(
    "cat head tail wc ls pwd echo true false which type file stat du df diff cmp comm cut tr nl basename dirname "
    "realpath readlink printenv whoami id uname cd pushd popd test [ sleep seq md5sum sha1sum sha256sum sha512sum "
    "cksum column fold expand unexpand od hexdump grep egrep fgrep rev paste join tac strings nproc env : printf "
    "jq tree date hostname ps".split())


def _no_option(*names: str, letters: str = ""):
    """Read-only unless an argument is one of `names` (also as `--name=value`) or a short cluster holding `letters`."""

    def writes(text: str) -> bool:
        if any(text == name or text.startswith(name + "=") for name in names):
            return True
        return text.startswith("-") and not text.startswith("--") and any(l in text[1:] for l in letters)

    def check(args: list[Word]) -> bool:
        return all(w.literal and not writes(w.text) for w in args)

    return check


def _uniq(args: list[Word]) -> bool:
    return all(w.literal for w in args) and len([w for w in args if not w.text.startswith("-")]) <= 1


_ARGUMENT_CHECKS = {
    "sort": _no_option("--output", letters="o"),
    "uniq": _uniq,
    "find": _no_option("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"),
    "rg": _no_option("--pre"),
    "tree": _no_option(letters="o"),
    "date": _no_option("--set", letters="s"),
    "hostname": lambda args: not args,
    "file": _no_option("--compile", letters="C"),
}


def read_only(command: Command) -> bool:
    """Whether the command provably only reads: its own name, not a path; no wrapper that changes privileges."""
    name = command.name
    if name is None or "/" in name or not all(w.strip for w in command.wrappers):
        return False
    args = list(command.words[1:])
    if name == "git":
        return _git_reads(args, strict=True)
    check = _ARGUMENT_CHECKS.get(name)
    if check is not None:
        return check(args)
    return name in READS_ONLY


GIT_GLOBAL_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix",
                               "--config-env", "--exec-path"})
GIT_READS = frozenset(
    "status log diff show blame annotate grep ls-files ls-tree rev-parse describe shortlog cat-file show-ref "
    "for-each-ref count-objects check-ignore check-attr name-rev merge-base rev-list diff-tree diff-files "
    "diff-index var version help whatchanged show-branch cherry range-diff".split())
GIT_OTHER_WRITES = frozenset("add fetch init clone archive format-patch bundle fsck".split())
"""Changes files or fetched refs, but not history: not read-only, yet not under the git rule."""


def _git_split(args: list[Word]) -> tuple[bool, Word | None, list[Word]]:
    """(whether global options can run code or are unknown, the subcommand word, its arguments)."""
    i, risky = 0, False
    while i < len(args) and args[i].literal and args[i].text.startswith("-"):
        text = args[i].text
        name = text.split("=", 1)[0]
        risky = risky or name in ("-c", "--config-env", "--exec-path")
        i += 2 if text in GIT_GLOBAL_VALUES else 1
    return risky, (args[i] if i < len(args) else None), args[i + 1:]


def _git_reads(args: list[Word], strict: bool) -> bool:
    """Whether git with `args` only reads; `strict` also requires every argument to be literal and no output file."""
    risky, sub, rest = _git_split(args)
    if risky:
        return False
    if sub is None:
        return True
    if not sub.literal or (strict and not all(w.literal for w in rest)):
        return False
    texts = [w.text for w in rest]
    if strict and any(t.startswith(("--output", "-O", "--open-files-in-pager")) for t in texts):
        return False
    check = _GIT_SUBCOMMAND_CHECKS.get(sub.text)
    return check(texts) if check else sub.text in GIT_READS


LIST_VALUES = frozenset({"--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort",
                         "--format"})


def _listing(mutating: set[str], letters: str):
    """git branch/tag: read-only when they only list (no mutating option, also inside a `-xyz` cluster)."""

    def changes(text: str) -> bool:
        short = text.startswith("-") and not text.startswith("--")
        return text.split("=", 1)[0] in mutating or short and any(letter in text[1:] for letter in letters)

    def check(texts: list[str]) -> bool:
        listing = "-l" in texts or "--list" in texts
        operands = [t for before, t in zip([""] + texts, texts) if not t.startswith("-") and before not in LIST_VALUES]
        return not any(map(changes, texts)) and (listing or not operands)

    return check


def _first_in(*reads: str, empty: bool = True):
    def check(texts: list[str]) -> bool:
        return (not texts and empty) or bool(texts) and texts[0] in reads

    return check


_GIT_SUBCOMMAND_CHECKS = {
    "branch": _listing({"--delete", "--move", "--copy", "--force", "--set-upstream-to", "--unset-upstream",
                        "--edit-description", "--track", "--no-track"}, "dDmMcCfut"),
    "tag": _listing({"--delete", "--annotate", "--sign", "--force", "--message", "--file", "--local-user"},
                    "dasfmFu"),
    "stash": _first_in("list", "show", empty=False),
    "remote": _first_in("-v", "--verbose", "show", "get-url"),
    "worktree": _first_in("list", empty=False),
    "submodule": _first_in("status", "summary"),
    "notes": _first_in("list", "show"),
    "reflog": _first_in("show"),
    "config": lambda texts: bool(set(texts) & {"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list",
                                               "--get-urlmatch"}),
}


def git_mutation(command: Command) -> bool:
    """Whether the command is git changing history, refs, the index or the worktree — or may (aliases, `-c`)."""
    name = command.name
    if name is None or os.path.basename(name) != "git":
        return False
    args = list(command.words[1:])
    _, sub, _ = _git_split(args)
    if sub is not None and sub.literal and sub.text in GIT_OTHER_WRITES:
        return False
    return not _git_reads(args, strict=False)
