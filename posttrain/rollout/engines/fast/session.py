"""Multi-turn reuse: a conversation handle whose KV stays cached between turns.

    conv = engine.conversation(prompt_ids)
    reply = conv.generate(SamplingParams(max_new_tokens=64, stop=("</tool_call>",)))
    conv.append(observation_ids)          # tool output, next user message...
    reply = conv.generate(params)         # prefills only the appended tokens
    conv.close()                          # unpin its blocks (or use `with`)

The handle keeps the conversation's token ids and pins the paged-store blocks that hold
their KV, so LRU eviction cannot drop them; each turn is a normal `generate` call whose
prompt is the whole conversation, and the store serves every full block already seen.
Only the tokens after the last full cached block are run through the model.

The plain `generate` path gets the same reuse without a handle (finished sequences are
written back to the store when `cache_outputs` is on), but unpinned blocks may be evicted
under memory pressure; the handle makes the reuse a guarantee.

Limits: a conversation generates one sample per turn (n = 1): the sample is appended.
Loading new weights invalidates cached KV; the next turn re-encodes the conversation.
"""

from __future__ import annotations

from typing import Any, Sequence

from posttrain.errors import ConfigError
from posttrain.rollout.engine import Completion, GenRequest, SamplingParams


class Conversation:
    def __init__(self, engine: Any, prompt_ids: Sequence[int] = ()) -> None:
        self.engine = engine
        self.ids: list[int] = list(prompt_ids)
        self._pinned: list[int] = []
        self.turns = 0
        self.prefilled_tokens = 0  # tokens this conversation ran through prefill, over all turns
        engine._conversations.add(self)

    def append(self, ids: Sequence[int]) -> None:
        """Extend the conversation (tool observation, user message) without generating."""
        self.ids.extend(ids)

    def generate(self, params: SamplingParams = SamplingParams(), deadline_s: float | None = None,
                 request_id: str = "") -> Completion:
        """Generate one reply to the conversation so far and append it."""
        if params.n != 1:
            raise ConfigError(f"a conversation turn generates one sample (n=1), got n={params.n}")
        before = self.engine.prefill_stats.computed_tokens
        out = self.engine.generate([GenRequest(tuple(self.ids), params, id=request_id, deadline_s=deadline_s)])[0]
        self.prefilled_tokens += self.engine.prefill_stats.computed_tokens - before
        if out.finish_reason != "error":
            self.ids.extend(out.token_ids)
            self.turns += 1
            self._repin()
        return out

    def _repin(self) -> None:
        store = self.engine.store
        blocks = store.lookup(self.ids, len(self.ids), count=False)
        store.pin(blocks)
        store.unpin(self._pinned)
        self._pinned = blocks

    def _invalidate(self) -> None:
        """New weights: the store was cleared, so the pins refer to nothing."""
        self._pinned = []

    def close(self) -> None:
        self.engine.store.unpin(self._pinned)
        self._pinned = []
        self.engine._conversations.discard(self)

    def __enter__(self) -> "Conversation":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
