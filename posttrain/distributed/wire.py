"""Wire form of sandbox results: `ExecResult` holds read-only mappings, which do not pickle.

The pool actor sends `to_wire(result)` (plain dicts and lists) and the driver rebuilds the
frozen dataclasses with `from_wire`, so what a verifier sees remotely is field-for-field
what it would see from a local pool.
"""

from __future__ import annotations

from typing import Any

from posttrain.types import ExecLimits, ExecResult, FileChange, thaw

_TAG = "__exec_result__"


def to_wire(value: Any) -> Any:
    if isinstance(value, ExecResult):
        return {_TAG: thaw(value)}
    return value


def from_wire(value: Any) -> Any:
    if isinstance(value, dict) and _TAG in value:
        d = value[_TAG]
        return ExecResult(**{**d, "limits": ExecLimits(**d["limits"]),
                             "files_changed": tuple(FileChange(**f) for f in d["files_changed"])})
    return value
