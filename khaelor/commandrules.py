"""Bash rule patterns: one simple command, matched word by word.

Owns the `bash: PATTERN` syntax. A pattern is split into words as a shell
would (quotes group words); a `*` word matches any number of words (`git log
*` is `git log` with any arguments, or none), other words may hold `*`/`?`
globs matching one word, and a trailing `:*` means ` *`. A pattern with
shell operators (`;` `&` `|` `<` `>` `` ` `` `(` `)` `$`) is invalid: a rule
names one simple command, never a line. Command words only known when the
line runs match nothing but `*`; a glob word matches only itself or `*`.
"""

import shlex
from collections.abc import Iterator
from fnmatch import fnmatchcase

from khaelor.shellwords import GLOB, Command, Word

_OPERATORS = ";&|<>`()$\n"


def command_pattern(pattern: str) -> tuple[str, ...]:
    """The words of a bash rule pattern; ValueError if it is not one simple command."""
    if pattern.endswith(":*"):
        pattern = pattern[:-2] + " *"
    if any(char in _OPERATORS for char in _unquoted(pattern)):
        raise ValueError("a pattern matches one simple command: no ; & | < > ` ( ) $ (write one rule per command)")
    words = tuple(shlex.split(pattern))
    if not words:
        raise ValueError("the pattern has no words")
    return words


def _unquoted(pattern: str) -> str:
    """The characters of `pattern` neither quoted nor escaped; ValueError on an unclosed quote."""
    found, quote, chars = [], None, iter(pattern)
    for char in chars:
        if char == "\\" and quote != "'":
            next(chars, "")
        elif quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None
        elif quote is None:
            found.append(char)
    if quote is not None:
        raise ValueError("unbalanced quotes")
    return "".join(found)


def words_match(pattern: tuple[str, ...], words: tuple[Word, ...]) -> bool:
    """Whether the rule words match the command words; `*` spans any number of words."""
    reach = {0}
    for item in pattern:
        if item == "*":
            reach = set(range(min(reach), len(words) + 1))
        else:
            reach = {j + 1 for j in reach if j < len(words) and _word_matches(item, words[j])}
        if not reach:
            return False
    return len(words) in reach


def _word_matches(item: str, word: Word) -> bool:
    if word.kind == GLOB:
        return word.text == item
    if not word.literal:
        return False
    if "*" in item or "?" in item:
        return fnmatchcase(word.text, item)
    return word.text == item


def variants(command: Command) -> Iterator[tuple[Word, ...]]:
    """Every wrapper level of the command, also with a path-named command reduced to its basename."""
    for form in command.forms():
        yield form
        if form and form[0].literal and "/" in form[0].text:
            yield (Word(form[0].text.rsplit("/", 1)[-1]),) + form[1:]
