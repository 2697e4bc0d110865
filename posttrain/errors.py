"""User-facing errors. The CLI prints these as one line, without a traceback."""

from __future__ import annotations


class PosttrainError(Exception):
    """An error caused by user input (a file, a config, a flag); the message says which."""


class ConfigError(PosttrainError):
    """A bad config key, type or value. The message names the key and the file."""


class TaskFileError(PosttrainError):
    """A malformed task file. The message names the file, line and field."""


class ModelError(PosttrainError):
    """A missing or unusable model directory."""


class SandboxError(PosttrainError):
    """The sandbox could not run a request (bad limits, bad image, closed session)."""
