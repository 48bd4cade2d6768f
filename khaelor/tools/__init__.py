"""The tool registry: every tool the model may call, in the fixed order of its definitions.

The order and the definitions are part of the stable prompt prefix (SPEC §4),
so they never depend on the machine or the moment. Importing this package
loads the tool modules but nothing heavy (pathspec and difflib wait for use).
"""

from khaelor.tools import files, process, search, shell
from khaelor.tools.base import Tool
from khaelor.tools.process import stop_background

__all__ = ["all_tools", "get_tool", "stop_background"]

_TOOLS = (files.READ, files.WRITE, files.EDIT, shell.BASH, search.GLOB, search.GREP, search.LS, process.PROCESS)
_BY_NAME = {tool.name: tool for tool in _TOOLS}


def all_tools() -> tuple[Tool, ...]:
    """read, write, edit, bash, glob, grep, ls, process — in that order."""
    return _TOOLS


def get_tool(name: str) -> Tool | None:
    """The tool called `name`, or None."""
    return _BY_NAME.get(name)
