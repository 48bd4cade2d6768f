"""The vocabulary of shell analysis: words, simple commands, redirections, and reading words from the tree.

Owns what the parser's results are made of — `Word` (a value known before
the line runs, a glob, or something only known when it runs), `Command` (a
simple command and the wrappers it runs under), `Redirect`, `Analysis` — and
how a tree-sitter-bash node becomes a `Word`: quotes removed, escapes
applied, concatenations joined; anything that expands (variables,
substitutions, brace expansion) is `dynamic`, unquoted `*`/`?`/`[…]` make a
`glob`. Also `screen`, the check a line passes before it is parsed at all.
"""

import re
import shlex
from dataclasses import dataclass

MAX_CHARS = 10_000
LITERAL, GLOB, DYNAMIC = "literal", "glob", "dynamic"
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_GLOB = re.compile(r"[*?]|\[[^\]]+\]")


@dataclass(frozen=True)
class Word:
    """One shell word: its value when known before the line runs, else its source text."""

    text: str
    kind: str = LITERAL
    """literal (value known), glob (a pattern bash expands) or dynamic (only known when it runs)."""

    @property
    def literal(self) -> bool:
        return self.kind == LITERAL


@dataclass(frozen=True)
class Wrapper:
    """A command that runs another one: one level of a `Command`, outermost first."""

    words: tuple[Word, ...]
    """The wrapper's whole command as written, the command it runs included."""
    strip: bool
    """Allow rules may look past it: it does not change what the inner command may do."""
    grants: bool
    """An allow rule matching the whole form also allows the inner command."""


@dataclass(frozen=True)
class Command:
    """One simple command that could run, and the wrappers it runs under."""

    words: tuple[Word, ...]
    wrappers: tuple[Wrapper, ...] = ()

    def forms(self) -> list[tuple[Word, ...]]:
        """The command as each wrapper level sees it, outermost first, itself last."""
        return [wrapper.words for wrapper in self.wrappers] + [self.words]

    @property
    def name(self) -> str | None:
        """The command name if it is literal."""
        return self.words[0].text if self.words and self.words[0].literal else None

    def __str__(self) -> str:
        return join(self.words)


@dataclass(frozen=True)
class Redirect:
    """A redirection to (`writes`) or from a file."""

    op: str
    target: Word
    writes: bool


@dataclass(frozen=True)
class Analysis:
    """Everything one command line could run or touch, and what was not understood."""

    commands: tuple[Command, ...]
    redirects: tuple[Redirect, ...]
    problems: tuple[str, ...]


def join(words) -> str:
    """Words as a command line: literal ones quoted as needed, the rest as written."""
    return " ".join(shlex.quote(w.text) if w.literal else w.text for w in words)


def screen(text: str) -> str | None:
    """Why `text` cannot be analysed at all (too long, control characters, not text), or None."""
    if len(text) > MAX_CHARS:
        return f"the command is longer than {MAX_CHARS} characters"
    if CONTROL.search(text):
        return "the command contains control characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "the command is not valid text"
    if not text.strip():
        return "the command is empty"
    return None


def text_of(node) -> str:
    """The source text of a syntax node."""
    return node.text.decode("utf-8", "replace")


# --- words ---------------------------------------------------------------------


def word_of(node) -> Word:
    """The `Word` a syntax node stands for."""
    return _word(node)[0]


def _word(node) -> tuple[Word, str]:
    """The word and its shape: the source with quoted parts and escapes blanked (for glob/brace checks)."""
    kind, raw = node.type, text_of(node)
    if kind == "word":
        return _classify(Word(_ESCAPED.sub(r"\1", raw.replace("\\\n", ""))), _ESCAPED.sub("_", raw))
    if kind == "number":
        return Word(raw), raw
    if kind == "raw_string":
        return Word(raw[1:-1]), "_"
    if kind == "string":
        return _double_quoted(node, raw), "_"
    if kind == "ansi_c_string":
        return (Word(raw[2:-1]) if "\\" not in raw else Word(raw, DYNAMIC)), "_"
    if kind == "command_name" and node.named_child_count == 1:
        return _word(node.named_children[0])
    if kind == "concatenation":
        parts = [_word(child) for child in node.children]
        if any(part.kind == DYNAMIC for part, _ in parts):
            return Word(raw, DYNAMIC), "_"
        return _classify(Word("".join(part.text for part, _ in parts)), "".join(shape for _, shape in parts))
    return Word(raw, DYNAMIC), "_"


def _classify(word: Word, shape: str) -> tuple[Word, str]:
    if _BRACE.search(shape):
        return Word(word.text, DYNAMIC), shape
    if _GLOB.search(shape):
        return Word(word.text, GLOB), shape
    return word, shape


def _double_quoted(node, raw: str) -> Word:
    if any(child.type != "string_content" for child in node.named_children):
        return Word(raw, DYNAMIC)
    inner = "".join(text_of(child) for child in node.named_children)
    return Word(re.sub(r"\\([$`\"\\])", r"\1", inner.replace("\\\n", "")))


def assignment_word(node) -> Word:
    """`NAME=value` as one word, dynamic when the value is."""
    value = node.child_by_field_name("value")
    prefix = text_of(node)[: value.start_byte - node.start_byte] if value is not None else text_of(node)
    if value is None:
        return Word(prefix)
    word = word_of(value)
    return Word(prefix + word.text, word.kind) if word.literal else Word(text_of(node), DYNAMIC)
