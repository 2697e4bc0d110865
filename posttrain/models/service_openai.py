"""`openai`: a second model behind an OpenAI-compatible URL (a `posttrain serve` process, vLLM, a cluster).

Uses the official `openai` client (AsyncOpenAI). The client's own retries are off: ModelService
retries, so a failure is counted once per attempt and the run's `retries` is the only knob.
The server batches the concurrent requests of one backend call (posttrain serve's engine loop
joins them into its running batch).
"""

from __future__ import annotations

import asyncio
import os
from typing import Sequence

from posttrain.config_schema import SecondModelConfig
from posttrain.errors import ConfigError
from posttrain.models.service import ChatParams, Conversation, model_backend


@model_backend("openai")
class OpenAIBackend:
    def __init__(self, cfg: SecondModelConfig) -> None:
        import openai

        key = "none"  # posttrain serve on loopback takes no key; the client insists on one
        if cfg.api_key_env:
            if cfg.api_key_env not in os.environ:
                raise ConfigError(f"models: api_key_env {cfg.api_key_env!r} is not set in the environment")
            key = os.environ[cfg.api_key_env]
        self.model = cfg.model
        self.model_id = f"{cfg.url}#{cfg.model}"
        self.client = openai.AsyncOpenAI(base_url=cfg.url, api_key=key, max_retries=0, timeout=cfg.timeout_s)

    async def _one(self, conv: Conversation, params: ChatParams) -> str:
        kwargs = {"seed": params.seed} if params.seed is not None else {}
        r = await self.client.chat.completions.create(model=self.model, messages=[dict(m) for m in conv],
                                                      max_tokens=params.max_new_tokens,
                                                      temperature=params.temperature, **kwargs)
        return r.choices[0].message.content or ""

    async def chat_batch(self, convs: Sequence[Conversation], params: ChatParams) -> list[str | BaseException]:
        return list(await asyncio.gather(*(self._one(c, params) for c in convs), return_exceptions=True))

    def close(self) -> None:
        pass  # the httpx pool closes with the process; closing needs the loop that opened it
