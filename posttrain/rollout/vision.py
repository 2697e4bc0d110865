"""Image-aware prompts: task messages + image attachments -> token ids + model image inputs.

    vp = encode_task_prompt(tok, task, "LlavaForConditionalGeneration (runs/x)")
    GenRequest(vp.ids, params, images=vp.images)       # engines pass vp.images to the model
    inputs, image_id = batch_model_inputs(trajs)        # the trainer recomputes with the same pixels

A message with attachments becomes multimodal chat content (`[{"type": "image"}, ...,
{"type": "text", "text": ...}]`) rendered by the processor's own chat template, and the
processor expands each image placeholder to one token per patch, so the same code serves
the tiny LLaVA and a real Qwen2.5-VL. `vp.images` is a tuple holding one dict of extra
model inputs for the request (`pixel_values` [n_img, C, H, W], plus e.g. `image_grid_thw`
for Qwen2-VL); engines concatenate these along dim 0 across a batch.

The processed inputs are remembered per task version (bounded, in this process) so the
trainer can recompute logprobs over exactly the pixels the engine saw; trajectories stay
small and JSON-friendly. Failures (missing, corrupt or oversized image; an image sent
to a text-only model) come back as `vp.error`, a one-line message naming the task, so
one bad task becomes one errored trajectory, never a crashed run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

from posttrain.errors import PosttrainError
from posttrain.models.vlm import processor_of
from posttrain.rollout.prompting import encode_prompt
from posttrain.tasks.images import MAX_SIDE, ImageError, open_image
from posttrain.types import Message, Task

_CACHE_MAX = 50_000  # task versions; a 32x32 image is 12 KB of fp32 pixels
_CACHE: "OrderedDict[str, tuple[dict, int | None]]" = OrderedDict()
_LOCK = threading.Lock()


@dataclass(frozen=True)
class VisionPrompt:
    ids: tuple[int, ...] = ()
    images: tuple[Any, ...] = ()  # () for text-only prompts, else (dict of model image inputs,)
    error: str = ""
    image_token_id: int | None = None


@dataclass
class _Parts:
    chat: list[dict] = field(default_factory=list)
    images: list[Any] = field(default_factory=list)


def _chat(messages: Sequence[Message], max_side: int) -> _Parts:
    parts = _Parts()
    for m in messages:
        atts = [a for a in m.attachments if a.kind == "image"]
        if not atts:
            parts.chat.append({"role": m.role, "content": m.content})
            continue
        parts.images += [open_image(a, max_side) for a in atts]
        content = [{"type": "image"} for _ in atts] + ([{"type": "text", "text": m.content}] if m.content else [])
        parts.chat.append({"role": m.role, "content": content})
    return parts


def encode_task_prompt(tok: Any, task: Task, model_label: str = "this model") -> VisionPrompt:
    """Prompt ids (+ image inputs) for `task`; never raises for a bad image or a text-only model."""
    vp = encode_messages(tok, task.prompt, f"task {task.id}", model_label)
    if vp.images:
        remember(task.version, vp.images[0], vp.image_token_id)
    return vp


def encode_messages(tok: Any, messages: Sequence[Message], name: str, model_label: str = "this model"
                    ) -> VisionPrompt:
    """Prompt ids (+ image inputs) for chat `messages` (a task's prompt, a DPO pair's); errors
    name `name`. Never raises for a bad image or a text-only model."""
    n_img = sum(a.kind == "image" for m in messages for a in m.attachments)
    if n_img == 0:
        return VisionPrompt(encode_prompt(tok, messages))
    processor = processor_of(tok)
    if processor is None:
        return VisionPrompt(error=f"{name} has {n_img} image attachment(s) but model {model_label} is "
                                  f"text-only (no image processor); use a vision-language model")
    try:
        parts = _chat(messages, int(getattr(tok, "max_image_side", MAX_SIDE)))
    except ImageError as e:
        return VisionPrompt(error=f"{name}: {e}")
    text = processor.apply_chat_template(parts.chat, add_generation_prompt=True, tokenize=False)
    enc = processor(text=[text], images=parts.images, return_tensors="pt")
    inputs = {k: v for k, v in enc.items() if k not in ("input_ids", "attention_mask")}
    image_id = getattr(processor, "image_token_id", None)
    return VisionPrompt(tuple(enc["input_ids"][0].tolist()), (inputs,), "", image_id)


def remember(version: str, inputs: dict, image_token_id: int | None) -> None:
    with _LOCK:
        _CACHE[version] = (inputs, image_token_id)
        _CACHE.move_to_end(version)
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)


def recall(version: str) -> tuple[dict, int | None] | None:
    with _LOCK:
        return _CACHE.get(version)


def text_only_error(request: Any, model_label: str) -> str:
    """The per-request error for an image prompt sent to a text-only model (every engine's);
    `model_label` from models.vlm.model_name."""
    return f"request {request.id} carries {len(request.images)} image input(s) but model {model_label} is text-only"


def concat_inputs(dicts: Sequence[dict]) -> dict:
    """Per-request image input dicts -> one batch dict (each tensor concatenated along dim 0)."""
    import torch

    keys = sorted({k for d in dicts for k in d})
    return {k: torch.cat([d[k] for d in dicts if k in d], 0) for k in keys}


def batch_model_inputs(trajs: Sequence[Any]) -> tuple[dict, int | None]:
    """Image inputs of a batch of trajectories, in row order ({} when none has images)."""
    found = [recall(t.task_version) for t in trajs]
    if all(f is None for f in found):
        return {}, None
    image_id = next(f[1] for f in found if f is not None)
    if image_id is not None:
        for t, f in zip(trajs, found):
            if f is None and image_id in t.prompt_ids:
                raise PosttrainError(f"task {t.task_id} (version {t.task_version}): prompt has image tokens but its "
                                     f"image inputs are not in this process; re-encode the task before training")
    return concat_inputs([f[0] for f in found if f is not None]), image_id


def with_text(task: Task, text: str) -> Task:
    """A copy of `task` whose last user message reads `text` (attachments kept)."""
    import dataclasses

    msgs = list(task.prompt)
    last = msgs[-1]
    msgs[-1] = Message(last.role, text, last.tool_calls, last.attachments, last.name)
    return dataclasses.replace(task, prompt=tuple(msgs))


def engine_model_label(engine: Any) -> str:
    """A human name for the engine's model, for error messages ("LlamaForCausalLM (runs/x/sft-model)")."""
    from posttrain.rollout.engine import DescribesModel

    return engine.model_label if isinstance(engine, DescribesModel) else type(engine).__name__
