"""`local`: a second model run in-process by posttrain's own engine (`hf` by default, or `fast`).

    backend = LocalBackend(SecondModelConfig(path="models/smollm2"))   # or path="tiny"
    texts = await backend.chat_batch([[{"role": "user", "content": "hi"}]], ChatParams())

Conversations are chat-templated with the model's own template and go through a `GenBatcher`,
so concurrent callers (episodes asking their simulated user, a group's answers to the judge)
share one `engine.generate` call, off the event loop. The model is loaded once per backend;
`teacher_logprobs` (train/distill.py) reads the same weights.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from posttrain.config_schema import SecondModelConfig
from posttrain.models.service import ChatParams, Conversation, model_backend
from posttrain.rollout.agent.gen import GenBatcher
from posttrain.rollout.engine import GenRequest, SamplingParams


def load_second_model(path: str) -> tuple[Any, Any]:
    """(hf model, tokenizer) for a directory or `tiny` (the built-in tiny Llama, seed 0)."""
    if path == "tiny":
        from posttrain.models.tiny import build_tiny

        return build_tiny(seed=0)
    from posttrain.models import load_policy

    return load_policy(path)


@model_backend("local")
class LocalBackend:
    def __init__(self, cfg: SecondModelConfig) -> None:
        from posttrain.rollout import make_engine

        assert cfg.path is not None
        self.model, self.tok = load_second_model(cfg.path)
        self.model.eval()
        self.engine = make_engine(cfg.engine, self.model, self.tok)
        self.model_id = cfg.path
        self.batch = cfg.batch
        self._batchers: dict[int, GenBatcher] = {}  # per event loop: a batcher's worker task lives on one loop

    def _batcher(self) -> GenBatcher:
        loop = asyncio.get_running_loop()
        if id(loop) not in self._batchers:
            self._batchers[id(loop)] = GenBatcher(self.engine, max_batch=self.batch)
        return self._batchers[id(loop)]

    def encode(self, conv: Conversation) -> tuple[int, ...]:
        text = self.tok.apply_chat_template([dict(m) for m in conv], add_generation_prompt=True, tokenize=False)
        return tuple(self.tok(text, add_special_tokens=False)["input_ids"])

    async def chat_batch(self, convs: Sequence[Conversation], params: ChatParams) -> list[str | BaseException]:
        sp = SamplingParams(temperature=params.temperature, max_new_tokens=params.max_new_tokens, seed=params.seed)
        batcher = self._batcher()
        outs = await asyncio.gather(*(batcher.generate(GenRequest(self.encode(c), sp, id=f"svc{i}"))
                                      for i, c in enumerate(convs)))
        return [RuntimeError(c.error) if c.finish_reason == "error" else c.text for c in outs]

    def close(self) -> None:
        self._batchers.clear()
