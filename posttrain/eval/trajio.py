"""Trajectory <-> JSON dict, so stored samples can be re-verified and cached generations reused.

`thaw` (posttrain.types) writes the dataclass tree as plain JSON; `trajectory_from_dict`
rebuilds it, including tool calls, sandbox results and the verifier's verdict. Unknown
keys are ignored so records written by a newer version still load.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from posttrain.types import ExecLimits, ExecResult, FileChange, ToolCall, Trajectory, TrajError, Turn, VerifyResult, thaw


def _known(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _exec_result(d: Mapping[str, Any] | None) -> ExecResult | None:
    if d is None:
        return None
    kw = _known(ExecResult, d)
    kw["files_changed"] = tuple(FileChange(**_known(FileChange, f)) for f in d.get("files_changed", ()))
    kw["limits"] = ExecLimits(**_known(ExecLimits, d.get("limits") or {}))
    return ExecResult(**kw)


def _turn(d: Mapping[str, Any]) -> Turn:
    kw = _known(Turn, d)
    kw["token_ids"] = tuple(d.get("token_ids", ()))
    kw["logprobs"] = tuple(d.get("logprobs", ()))
    kw["token_versions"] = tuple(d.get("token_versions", ()))
    tc = d.get("tool_call")
    kw["tool_call"] = ToolCall(**_known(ToolCall, tc)) if tc else None
    kw["exec_result"] = _exec_result(d.get("exec_result"))
    return Turn(**kw)


def verify_from_dict(d: Mapping[str, Any] | None) -> VerifyResult | None:
    return VerifyResult(**_known(VerifyResult, d)) if d else None


def trajectory_to_dict(traj: Trajectory) -> dict[str, Any]:
    return thaw(traj)


def trajectory_from_dict(d: Mapping[str, Any]) -> Trajectory:
    kw = _known(Trajectory, d)
    kw["prompt_ids"] = tuple(d.get("prompt_ids", ()))
    kw["turns"] = tuple(_turn(t) for t in d.get("turns", ()))
    kw["verify"] = verify_from_dict(d.get("verify"))
    err = d.get("error")
    kw["error"] = TrajError(**_known(TrajError, err)) if err else None
    return Trajectory(**kw)
