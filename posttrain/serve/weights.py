"""`POST /admin/weights {"path": CHECKPOINT_DIR, "version": N}`: hot reload, verified as the RL sync is.

The checkpoint (an HF directory, as RL writes them) is loaded off the event loop, its
tensor names and shapes are checked against the engine before anything is copied (a
wrong checkpoint is a 400 and the served weights stay as they were), then the engine
loop drains the running sequences (new requests wait) and installs it with the engine's
own `load_weights` path (`weight_sync.install`: every installed tensor compared with the
checkpoint byte for byte, prefix cache cleared). Requests that were running finish on
the old version; the ones that waited run on the new one; each reports its version.
"""

from __future__ import annotations

import asyncio
from typing import Any

from posttrain.serve.protocol import ApiError, WeightsRequest


def _load_state(path: str, eng: Any) -> dict[str, Any]:
    from posttrain.errors import PosttrainError
    from posttrain.models import load_policy
    from posttrain.models.model_dir import check_model_dir

    try:
        check_model_dir(path, need_chat_template=False)
        model, _ = load_policy(path)
    except PosttrainError as e:
        raise ApiError(400, str(e), param="path") from None
    state = model.state_dict()
    why = eng.weights_mismatch(state)
    if why:
        raise ApiError(400, f"checkpoint {path} does not fit the served model: {why}", param="path",
                       code="weights_mismatch")
    return state


async def reload_weights(serve: Any, body: WeightsRequest) -> dict[str, Any]:
    eng = serve.engine
    state = await asyncio.to_thread(_load_state, body.path, eng)
    version = body.version if body.version is not None else max(0, eng.weights_version) + 1
    rep = await serve.loop.reload(lambda e: e.install_serving(state, version))  # the loop thread holds the engine
    serve.counters["reloads"] += 1
    return {"version": rep.version, "tensors": rep.tensors, "bytes": rep.bytes, "copy_s": rep.copy_s,
            "verify_s": rep.verify_s, "path": body.path}
