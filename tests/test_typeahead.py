"""Input typed while a turn runs: through the readers, on real pipes and a real pseudo-terminal."""

import os
import pty
import subprocess
import sys
import threading
import time

import pytest

from khaelor.errors import UsageError
from khaelor.reader import PlainReader
from khaelor.typeahead import LineBuffer, TerminalLines, is_goal
from tests.conftest import khaelor_env


@pytest.fixture
def pipe():
    """A pipe: (a PlainReader on its read end, a function that writes to it)."""
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb", buffering=0) as stream:
        yield PlainReader(stream), lambda data: os.write(write_end, data)
    os.close(write_end)


def eventually(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def typeahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "khaelor-typeahead"]


def test_only_a_goal_line_that_comes_next_is_taken_during_a_turn(pipe):
    reader, write = pipe
    applied = []
    with reader.watch(applied.append):
        write(b"/goal pause\nrun the tests\n/goal clear\n")
        assert eventually(lambda: applied == ["/goal pause"])
        time.sleep(0.3)
        assert applied == ["/goal pause"]
        assert reader.read("") == "run the tests"
        assert eventually(lambda: applied == ["/goal pause", "/goal clear"])
    assert typeahead_threads() == []


def test_nothing_is_taken_outside_a_turn(pipe):
    reader, write = pipe
    write(b"/goal pause\n")
    with reader.watch(lambda line: None):
        pass
    time.sleep(0.2)
    assert reader.read("") == "/goal pause"


def test_a_goal_line_is_never_the_answer_to_a_question_asked_during_a_turn(pipe):
    reader, write = pipe
    applied = []
    write(b"/goal pause\no\n")
    with reader.watch(applied.append):
        assert reader.ask("allow? ") == "o"
    assert applied == ["/goal pause"]


def test_the_grace_wait_reads_the_same_buffer(pipe):
    reader, write = pipe
    write(b"half a li")
    assert reader.wait_for_input("", 0.1) is None
    write(b"ne\r\nlast")
    assert reader.wait_for_input("", 5) == "half a line"
    assert reader.wait_for_input("", 0.1) is None


def test_invalid_utf8_names_the_line_and_the_next_line_still_reads():
    read_end, write_end = os.pipe()
    os.write(write_end, b"fine\nbad \xff here\nafter")
    os.close(write_end)
    lines = LineBuffer(read_end)
    assert lines.next_line() == "fine"
    with pytest.raises(UsageError, match=r"not valid UTF-8 \(line 2, byte 4\)"):
        lines.next_line()
    assert lines.next_line() == "after" and lines.next_line() is None
    os.close(read_end)


def test_invalid_utf8_piped_into_the_repl_is_a_usage_error(workspace):
    done = subprocess.run([sys.executable, "-m", "khaelor"], cwd=workspace, env=khaelor_env(),
                          input=b"/help\n\xff\xfe bad\n", capture_output=True, timeout=60)
    assert done.returncode == 2
    assert b"standard input is not valid UTF-8 (line 2, byte 0)" in done.stderr and b"Traceback" not in done.stderr


def test_in_memory_streams_read_as_before():
    import io

    reader = PlainReader(io.StringIO("/goal pause\nhello\n"))
    applied = []
    with reader.watch(applied.append):
        assert reader.read("") == "hello"
    assert applied == ["/goal pause"] and reader.read("") is None


def test_a_terminal_hands_over_finished_lines_only():
    master, slave = pty.openpty()
    try:
        lines = TerminalLines.of(slave)
        applied = []
        with lines.watch(applied.append):
            os.write(master, b"/goal pause\n\nnext request\nhalf typ")
            assert eventually(lambda: applied == ["/goal pause"] and lines.typed == ["next request"])
        assert typeahead_threads() == []
        assert lines.next_typed() == "next request" and lines.next_typed() is None
        assert lines.take_draft() == ""
        os.write(master, b"ed\n")
        assert os.read(slave, 100) == b"half typed\n"  # the unfinished line stayed in the terminal
    finally:
        os.close(master)
        os.close(slave)


def test_a_line_ended_with_ctrl_d_becomes_the_next_prompts_draft():
    master, slave = pty.openpty()
    try:
        lines = TerminalLines.of(slave)
        with lines.watch(lambda line: None):
            os.write(master, b"keep this\x04")
            time.sleep(0.3)
            with lines.paused():
                time.sleep(0.2)
                assert typeahead_threads() == []
        assert lines.take_draft() == "keep this" and lines.take_draft() == ""
    finally:
        os.close(master)
        os.close(slave)


def test_no_terminal_no_watching():
    read_end, write_end = os.pipe()
    assert TerminalLines.of(read_end) is None and TerminalLines.of(None) is None
    os.close(read_end)
    os.close(write_end)


def test_is_goal():
    assert is_goal("/goal pause") and is_goal("  /goal") and is_goal("/goal ship it")
    assert not is_goal("/goals") and not is_goal("goal pause") and not is_goal("/go pause")
