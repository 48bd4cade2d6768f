"""Shell analysis: what a bash line would run, seen through wrappers, and what it is not sure of."""

import random
import subprocess
import sys
import time

import pytest

from khaelor.shellparse import analyse
from khaelor.shellrisk import git_mutation, read_only
from khaelor.shellwords import DYNAMIC, GLOB, LITERAL, join
from tests.conftest import ROOT


def commands(line: str) -> list[str]:
    return [str(command) for command in analyse(line).commands]


def only(line: str):
    [command] = analyse(line).commands
    return command


@pytest.mark.parametrize("line, expected", [
    ("a; b && c || d | e |& f & g\nh", ["a", "b", "c", "d", "e", "f", "g", "h"]),
    ("(a; (b)) && { c; }", ["a", "b", "c"]),
    ("echo $(a) `b` <(c) >(d) \"$(e)\"", ["a", "b", "c", "d", "e", "echo $(a) `b` <(c) >(d) \"$(e)\""]),
    ("if a; then b; elif c; then d; else e; fi", ["a", "b", "c", "d", "e"]),
    ("while a; do b; done; until c; do d; done", ["a", "b", "c", "d"]),
    ("for x in 1 2; do a $x; done", ["a $x"]),
    ("case $v in x) a;; *) b;; esac", ["a", "b"]),
    ("f() { a; }; f", ["a", "f"]),
    ("! a", ["a"]),
    ("cat <<EOF\n$(a)\nEOF", ["a", "cat"]),
    ("cat <<'EOF'\n$(a)\nEOF", ["cat"]),
    ("cat <<< \"$(a)\"", ["a", "cat"]),
    ("x=$(a) y=1", ["x=$(a)", "a", "y=1"]),
    ("export A=$(a)", ["a", "export A=$(a)"]),
    ("echo ${x:-$(a)} $((1 + $(b)))", ["a", "b", "echo ${x:-$(a)} $((1 + $(b)))"]),
    ("git >/dev/null commit -m x", ["git commit -m x"]),
    ("echo a > f b c", ["echo a b c"]),
    ("# nothing", []),
])
def test_every_simple_command_is_found(line, expected):
    assert commands(line) == expected


def test_words_have_their_shell_values():
    words = only("\\rm 'a b' \"c\\\"d\" e\\ f r\"m\" $'x' *.py ~/x x{a,b} {1..3} $v \"$v\" '*'").words
    assert [(w.text, w.kind) for w in words] == [
        ("rm", LITERAL), ("a b", LITERAL), ('c"d', LITERAL), ("e f", LITERAL), ("rm", LITERAL), ("x", LITERAL),
        ("*.py", GLOB), ("~/x", LITERAL), ("x{a,b}", DYNAMIC), ("{1..3}", DYNAMIC), ("$v", DYNAMIC),
        ('"$v"', DYNAMIC), ("*", LITERAL)]
    assert join(words[:3]) == "rm 'a b' 'c\"d'"


def test_find_braces_stay_literal_for_find():
    find, inner = analyse("find . -exec rm {} \\;").commands
    assert [w.text for w in find.words] == ["find", ".", "-exec", "rm", "{}", ";"]
    assert [(w.text, w.kind) for w in inner.words] == [("rm", LITERAL), ("{}", DYNAMIC)]


@pytest.mark.parametrize("line, forms, levels", [
    ("sudo -u root timeout 5 rm x", ["sudo -u root timeout 5 rm x", "timeout 5 rm x", "rm x"],
     [(False, True), (True, True)]),
    ("LANG=C nice -n 5 ls", ["LANG=C nice -n 5 ls", "nice -n 5 ls", "ls"], [(True, True), (True, True)]),
    ("LD_PRELOAD=x ls", ["LD_PRELOAD=x ls", "ls"], [(False, True)]),
    ("env -i PATH=/x ls", ["env -i PATH=/x ls", "ls"], [(False, True)]),
    ("env TZ=UTC date", ["env TZ=UTC date", "date"], [(True, True)]),
    ("command -p ls", ["command -p ls", "ls"], [(True, True)]),
    ("stdbuf -oL -e0 grep x", ["stdbuf -oL -e0 grep x", "grep x"], [(True, True)]),
    ("xargs -0 -n 1 rm -f", ["xargs -0 -n 1 rm -f", "rm -f <input>"], [(True, False)]),
    ("bash -lc 'rm x'", ["bash -lc 'rm x'", "rm x"], [(True, False)]),
    ("sh -o pipefail -c 'rm x' name arg", ["sh -o pipefail -c 'rm x' name arg", "rm x"], [(True, False)]),
    ("eval rm x", ["eval rm x", "rm x"], [(True, False)]),
    ("trap -- 'rm x' EXIT", ["trap -- 'rm x' EXIT", "rm x"], [(True, False)]),
    ("watch -n 1 -x rm x", ["watch -n 1 -x rm x", "rm x"], [(True, False)]),
    ("doas -u root rm x", ["doas -u root rm x", "rm x"], [(False, True)]),
    ("env - rm x", ["env - rm x", "rm x"], [(True, True)]),
    ("sudo --preserve-env=PATH -- rm x", ["sudo --preserve-env=PATH -- rm x", "rm x"], [(False, True)]),
    ("nice -10 timeout -s KILL 5 rm x", ["nice -10 timeout -s KILL 5 rm x", "timeout -s KILL 5 rm x", "rm x"],
     [(True, True), (True, True)]),
])
def test_wrappers_are_seen_through(line, forms, levels):
    command = analyse(line).commands[-1]
    assert [join(form) for form in command.forms()] == forms
    assert [(w.strip, w.grants) for w in command.wrappers] == levels


@pytest.mark.parametrize("line", ["command -v rm", "sudo -l", "env", "timeout 5", "xargs --help", "bash script.sh",
                                  "trap - EXIT", "eval"])
def test_wrappers_without_an_inner_command_are_plain(line):
    command = only(line)
    assert command.wrappers == () and str(command) == line


def test_redirections_are_recorded_with_direction():
    analysis = analyse("a < in > out 2>> err &> all >| clobber 2>&1 >&2 >&file 3<&0 > >(b) > /dev/null")
    assert [(r.op, r.target.text, r.writes) for r in analysis.redirects] == [
        ("<", "in", False), (">", "out", True), (">>", "err", True), ("&>", "all", True), (">|", "clobber", True),
        (">&", "file", True), (">", "/dev/null", True)]
    assert commands("a < in > out 2>> err") == ["a"]


@pytest.mark.parametrize("line, problem", [
    ("echo 'open", "bash cannot parse it"),
    ("cat <> f", "bash cannot parse it"),
    ("$CMD x", "only known when it runs"),
    ("$(echo rm) x", "only known when it runs"),
    ("echo x | bash", "reads the commands to run from its standard input"),
    ("bash -c \"$S\"", "only known when it runs"),
    ("eval \"$S\"", "eval of text only known when it runs"),
    ("echo $((x + 1))", "arithmetic on variables"),
    ("for ((i = 0; i < 3; i++)); do :; done", "arithmetic on variables"),
    ("[[ $x -eq 1 ]]", "arithmetic comparison"),
    ("echo ${x@P}", "can run code"),
    ("for PATH in /tmp; do ls; done", "a loop assigns the variable 'PATH'"),
    ("timeout --bogus 5 ls", "options of 'timeout' are not understood"),
    ("env -S 'rm x' y", "options of 'env' are not understood"),
    ("find . -exec rm {}", "without a complete command"),
    ("find . $ACTION rm {} +", "find's expression '$ACTION' is only known when it runs"),
    ("bash $OPTS x", "what bash runs ($OPTS) is only known when it runs"),
    ("cat $\"x\"", "not understood"),
    ("x" * 10_001, "longer than 10000 characters"),
    ("ls\x00x", "control characters"),
    ("echo \u202e", "control characters"),
    ("echo \udcff", "not valid text"),
    ("   ", "empty"),
    ("(" * 300 + "ls" + ")" * 300, "nested too deeply"),
    ("nice " * 20 + "ls", "too many nested wrapper"),
    ("bash -c \"bash -c 'bash -c \\\"bash -c \\\\\\\"bash -c ls\\\\\\\"\\\"'\"", "too deeply"),
])
def test_what_is_not_understood_is_a_problem(line, problem):
    problems = analyse(line).problems
    assert any(problem in p for p in problems), problems


def test_plain_lines_have_no_problems():
    for line in ["git status", "ls -la src | wc -l", "cd src && make test > /dev/null 2>&1", "find \"$d\" -name \"$p\"",
                 "find . -name '*.py' -exec grep -l x {} +", "echo $((1 + 2))", "[ \"$x\" -eq 1 ]"]:
        assert analyse(line).problems == (), line


@pytest.mark.parametrize("line, reads", [
    ("ls -la", True), ("cat a b", True), ("grep -r x .", True), ("git status", True), ("git log --oneline", True),
    ("git diff HEAD~1", True), ("git branch", True), ("git branch --list 'f*'", True), ("git tag -l", True),
    ("git stash list", True), ("git config --get user.name", True), ("git -C sub status", True),
    ("sort a", True), ("find . -name x", True), ("env", True), ("LANG=C ls", True), ("timeout 5 cat f", True),
    ("git log --output=f", False), ("git -c core.pager=x log", False), ("git commit", False),
    ("git branch new", False), ("git tag v1", False), ("git stash", False), ("git config user.name x", False),
    ("sort -o out a", False), ("sort -ro out a", False), ("git branch -av", True), ("git branch -df x", False),
    ("git branch --contains HEAD", True), ("git tag --points-at HEAD", True), ("git tag -fa v1", False), ("find . -delete", False), ("uniq in out", False), ("rm x", False),
    ("sed -n 1p f", False), ("./ls", False), ("sudo ls", False), ("FOO=1 ls", False), ("date -s now", False),
    ("hostname evil", False), ("rg --pre=sh x", False), ("git log $x", False),
])
def test_read_only_commands(line, reads):
    assert read_only(analyse(line).commands[-1]) is reads


@pytest.mark.parametrize("line, mutates", [
    ("git commit -m x", True), ("git push", True), ("git reset --hard", True), ("git checkout -- .", True),
    ("git switch main", True), ("git rebase main", True), ("git merge x", True), ("git stash", True),
    ("git clean -fd", True), ("git restore .", True), ("git tag v1", True), ("git branch -D x", True),
    ("git am p", True), ("git cherry-pick x", True), ("git revert x", True), ("git gc", True),
    ("git filter-branch x", True), ("git update-ref x y", True), ("git -C sub commit", True),
    ("git -c a=b commit", True), ("git -c a=b log", True), ("/usr/bin/git push", True), ("git ci", True),
    ("git $SUB", True), ("git branch $name", True), ("sudo git push", True),
    ("git status", False), ("git log $x", False), ("git add .", False), ("git fetch", False), ("git", False),
    ("git stash list", False), ("ls", False), ("gitk", False),
])
def test_git_mutations(line, mutates):
    assert git_mutation(analyse(line).commands[-1]) is mutates


def test_analysis_never_raises_on_garbage():
    generator = random.Random(1)
    alphabet = "ab $(){}[]<>|&;'\"`\\\n\t#=*?~!-@%^:,."
    for _ in range(400):
        line = "".join(generator.choice(alphabet) for _ in range(generator.randint(1, 80)))
        analysis = analyse(line)
        assert isinstance(analysis.problems, tuple)
    for _ in range(50):
        garbage = bytes(generator.randrange(256) for _ in range(200)).decode("utf-8", "replace")
        analyse(garbage)


def test_a_parse_takes_well_under_a_millisecond():
    line = "cd src && timeout 60 npm test -- --coverage 2>&1 | tee log.txt; git status --short"
    analyse(line)
    times = []
    for _ in range(50):
        started = time.perf_counter()
        analyse(line)
        times.append(time.perf_counter() - started)
    assert sorted(times)[len(times) // 2] < 0.002


def test_tree_sitter_is_imported_only_when_a_command_is_analysed():
    script = ("import sys; import khaelor.permissions, khaelor.asking, khaelor.agent, khaelor.shellparse\n"
              "from khaelor.cli import main\n"
              "assert 'tree_sitter' not in sys.modules\n"
              "from khaelor.shellparse import analyse; analyse('ls')\n"
              "assert 'tree_sitter' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
