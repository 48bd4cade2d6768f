"""Shell analysis for the permission engine: what a bash command line would run.

Owns `analyse(command) -> Analysis`. The line is parsed with a real bash
grammar (tree-sitter-bash) and walked for

* every simple command that could run — across `;` `&&` `||` `|` `|&` `&`,
  newlines, subshells, brace groups, control structures, function bodies,
  `$( )`, backticks, `<( )` / `>( )` and here-documents — each seen through
  the wrappers that run another command (`shellwrappers`); standalone
  assignments and `export`/`declare`… count as commands, since they change
  what later commands see;
* every redirection to or from a file (words bash reads after a
  redirection's target are arguments: `git >/dev/null commit` is a commit);
* the problems: whatever the walk cannot fully account for.

Invariants: `analyse` never raises and never guesses. Input it cannot read
completely — a parse error, a command name only known when it runs,
over-long input, control characters, code read from standard input,
arithmetic on variables (which can run code) — yields a problem, which the
permission engine turns into a question. tree-sitter is imported on the
first analysis, never at import time.
"""

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from khaelor.shellwords import Analysis, Command, Redirect, Word, Wrapper, assignment_word, screen, text_of, word_of
from khaelor.shellwrappers import WRAPPERS, safe_assignment

MAX_NESTING = 4
"""`bash -c` inside `bash -c` … deeper than this is not followed."""
MAX_DEPTH = 150
"""Syntax tree depth beyond which a line is not followed."""
MAX_WRAPPERS = 16
WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", ">&"})


def analyse(command: str) -> Analysis:
    """The simple commands, redirections and problems of one bash command line."""
    walker = _Walker()
    try:
        walker.script(command, _Scope(), 0)
    except RecursionError:
        walker.problem("the command is nested too deeply to analyse")
    return Analysis(tuple(walker.commands), tuple(walker.redirects), tuple(dict.fromkeys(walker.problems)))


@functools.cache
def _parser():
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


# --- the walk ----------------------------------------------------------------


@dataclass(frozen=True)
class _Scope:
    """Where commands found now would run: under which wrappers, at which `bash -c` depth."""

    wrappers: tuple[Wrapper, ...] = ()
    nesting: int = 0

    def within(self, words: tuple[Word, ...], strip: bool, grants: bool) -> "_Scope":
        return replace(self, wrappers=self.wrappers + (Wrapper(words, strip, grants),))


@dataclass
class _Walker:
    """Collects the commands, redirections and problems of the trees it walks."""

    commands: list[Command] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def record(self, words: tuple[Word, ...], scope: _Scope) -> None:
        self.commands.append(Command(words, scope.wrappers))

    def script(self, source: str, scope: _Scope, nesting: int) -> None:
        """Analyse `source` as bash would run it under `scope`."""
        why = screen(source)
        if why or nesting > MAX_NESTING:
            self.problem(why or "commands nested in `bash -c`/`eval` too deeply")
            return
        try:
            parser = _parser()
        except ImportError:
            self.problem("bash analysis is unavailable (tree-sitter-bash is not installed)")
            return
        root = parser.parse(source.encode("utf-8")).root_node
        if root.has_error:
            broken = next((n for n in _descendants(root) if n.is_error or n.is_missing), root)
            self.problem(f"bash cannot parse it (near {text_of(broken)[:40] or broken.type!r})")
        self.visit(root, replace(scope, nesting=nesting), 0)

    def visit(self, node, scope: _Scope, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.problem("the command is nested too deeply to analyse")
            return
        handler = _HANDLERS.get(node.type)
        if handler:
            handler(self, node, scope, depth)
        else:
            self.children(node, scope, depth)

    def children(self, node, scope: _Scope, depth: int) -> None:
        for child in node.children:
            self.visit(child, scope, depth + 1)

    def command(self, node, scope: _Scope, depth: int, extra: Iterable[Word] = (), stdin: str | None = None) -> None:
        """A simple command node: its words, prefix assignments and redirections."""
        words, assignments = [], []
        for index, child in enumerate(node.children):
            role = node.field_name_for_child(index)
            if child.type == "variable_assignment":
                assignments.append(assignment_word(child))
                self.children(child, scope, depth + 1)
            elif role == "redirect":
                stdin = self.redirect(child, scope, depth) or stdin
            elif role in ("name", "argument") and child.is_named:
                words.append(word_of(child))
                self.visit(child, scope, depth + 1)
            elif child.is_named or role:
                self.problem(f"part of the command is not understood ({text_of(child)[:40]!r})")
        words += extra
        if assignments and words:
            scope = scope.within(tuple(assignments) + tuple(words), all(map(safe_assignment, assignments)), True)
        if words:
            self.run(tuple(words), scope, stdin)

    def run(self, words: tuple[Word, ...], scope: _Scope, stdin: str | None = None) -> None:
        """Record the command `words`, seeing through a wrapper to the command it runs."""
        head = words[0]
        if not head.literal:
            self.problem(f"the command name {head.text!r} is only known when it runs")
        elif len(scope.wrappers) > MAX_WRAPPERS:
            self.problem("too many nested wrapper commands")
        else:
            unwrap = WRAPPERS.get(os.path.basename(head.text))
            if unwrap is not None and unwrap(self, words, scope, stdin):
                return
        self.record(words, scope)

    def redirect(self, node, scope: _Scope, depth: int, words_follow: bool = False) -> str | None:
        """Record a redirection node; returns the literal text it feeds to standard input, if any."""
        if node.type == "file_redirect":
            destinations = node.children_by_field_name("destination")
            for child in destinations:
                self.visit(child, scope, depth + 1)
            if destinations:
                self.note_redirect(_operator(node), destinations[0])
            if len(destinations) > 1 and not words_follow:
                self.problem(f"words after a redirection are not understood ({text_of(node)[:40]!r})")
            return None
        self.children(node, scope, depth)
        if node.type == "herestring_redirect" and node.named_child_count:
            word = word_of(node.named_children[-1])
            return word.text if word.literal else None
        return _heredoc_text(node) if node.type == "heredoc_redirect" else None

    def note_redirect(self, op: str, destination) -> None:
        if destination.type == "process_substitution":
            return
        target = word_of(destination)
        if op in (">&", "<&") and target.literal and (target.text.isdigit() or target.text == "-"):
            return
        self.redirects.append(Redirect(op, target, op in WRITE_OPS))


def _operator(node) -> str:
    return next((text_of(child) for child in node.children if not child.is_named), "")


def _heredoc_text(node) -> str | None:
    body = next((child for child in node.children if child.type == "heredoc_body"), None)
    if body is None:
        return ""
    if any(child.type != "heredoc_content" for child in body.named_children):
        return None
    return text_of(body)


def _on_redirected(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    """`body > target …`: bash reads words after a redirection's target as more arguments."""
    body, extra, stdin = node.child_by_field_name("body"), [], None
    for index, child in enumerate(node.children):
        if node.field_name_for_child(index) != "redirect":
            continue
        if child.type == "file_redirect":
            extra += [word_of(d) for d in child.children_by_field_name("destination")[1:]]
        stdin = walker.redirect(child, scope, depth, words_follow=True) or stdin
    if body is None:
        return
    if body.type == "command":
        walker.command(body, scope, depth + 1, extra, stdin)
        return
    if extra:
        walker.problem("words after a redirection of a compound command are not understood")
    walker.visit(body, scope, depth + 1)


def _on_command(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    walker.command(node, scope, depth)


def _on_file_redirect(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    walker.redirect(node, scope, depth)


def _on_assignment(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    """A standalone `NAME=value` changes what later commands see (PATH, IFS …): it needs permission itself."""
    walker.record((assignment_word(node),), scope)
    walker.children(node, scope, depth)


def _on_declaration(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    """`export`, `declare`, `local`, `readonly`, `typeset`, `unset`: recorded as commands of their own."""
    words = []
    for child in node.children:
        if not child.is_named:
            words.append(Word(text_of(child)))
        elif child.type == "variable_assignment":
            words.append(assignment_word(child))
            walker.children(child, scope, depth + 1)
        else:
            words.append(word_of(child))
            walker.visit(child, scope, depth + 1)
    walker.record(tuple(words), scope)


def _on_for(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    variable = node.child_by_field_name("variable")
    if variable is not None and not re.fullmatch(r"[a-z_][a-z0-9_]*", text_of(variable)):
        walker.problem(f"a loop assigns the variable {text_of(variable)!r}")
    walker.children(node, scope, depth)


def _on_arithmetic(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    """Arithmetic evaluates variable values as expressions, which can run commands."""
    if node.type != "compound_statement" or (node.child_count and node.children[0].type == "(("):
        if _mentions_names(node):
            walker.problem(f"arithmetic on variables is not understood ({text_of(node)[:40]!r})")
    walker.children(node, scope, depth)


def _on_test(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    operators = {text_of(n) for n in _descendants(node) if n.type == "test_operator"}
    if node.children and node.children[0].type == "[[" and operators & {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"}:
        if _mentions_names(node):
            walker.problem(f"arithmetic comparison of variables is not understood ({text_of(node)[:40]!r})")
    walker.children(node, scope, depth)


def _on_expansion(walker: _Walker, node, scope: _Scope, depth: int) -> None:
    if any(child.type == "@" for child in node.children):
        walker.problem(f"the expansion {text_of(node)[:40]!r} can run code")
    walker.children(node, scope, depth)


def _descendants(node):
    stack = list(node.children)
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _mentions_names(node) -> bool:
    names = {"variable_name", "word", "simple_expansion", "expansion", "subscript", "command_substitution"}
    return any(n.type in names for n in _descendants(node))


_HANDLERS = {
    "command": _on_command,
    "redirected_statement": _on_redirected,
    "file_redirect": _on_file_redirect,
    "variable_assignment": _on_assignment,
    "declaration_command": _on_declaration,
    "unset_command": _on_declaration,
    "for_statement": _on_for,
    "arithmetic_expansion": _on_arithmetic,
    "c_style_for_statement": _on_arithmetic,
    "compound_statement": _on_arithmetic,
    "test_command": _on_test,
    "expansion": _on_expansion,
}
