"""KHAELOR: a terminal-native autonomous engineering agent.

Importing the package does nothing but define the version: the SDK, the
terminal library and every file-system access wait until a command needs them.
"""

__version__ = "0.1.0"
