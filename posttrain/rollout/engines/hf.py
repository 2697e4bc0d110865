"""`hf`: the reference engine, built on `transformers` `generate`.

Slow but simple and obviously right: the `fast` engine is tested against it. Requests
with identical sampling parameters are batched into one `generate` call (left padding;
HF derives position ids from the attention mask, so padding does not shift positions).
Logprobs come from the raw logits (`output_logits=True`) at temperature 1, the quantity
the trainer recomputes. It stops on every id of `stop_token_ids` (EOS, the generation
config's EOS ids, the chat template's end-of-turn token). A stop string cuts the ids
after the token that completes it, so the ids a trajectory trains on are the ones whose
text was verified. Limits: no KV reuse across calls, no speculative decoding; `generate`
also stops a row at a stop string, but the cut itself is found after generation.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any, Mapping, Sequence

from posttrain.errors import ConfigError
from posttrain.registry import engine
from posttrain.rollout.engine import Completion, GenRequest, SamplingParams


def state_checksum(state: Mapping[str, Any]) -> str:
    """sha256 over every tensor's name, shape and bytes, in name order."""
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest()


@engine("hf", inflight_weights=False, max_batch_arg=True, model_check=None)  # HF loads what it can run
class HFEngine:
    def __init__(self, model: Any, tokenizer: Any, max_batch: int = 512) -> None:
        """`max_batch`: the most rows in one `generate` call; the only engine.args key `hf` takes
        (an unknown one is refused by name before this runs: registry.check_kwargs)."""
        if tokenizer.eos_token_id is None:
            raise ValueError("tokenizer has no EOS token: generation could never stop")
        if not isinstance(max_batch, int) or isinstance(max_batch, bool) or max_batch < 1:
            raise ConfigError(f"engine.args.max_batch must be an integer >= 1, got {max_batch!r}")
        self.model = model.eval()
        self.tok = tokenizer
        from posttrain.rollout.tokenizer_checks import stop_token_ids

        from posttrain.models.vlm import model_name

        self.stop_ids = stop_token_ids(tokenizer, model)
        self.model_label = model_name(model)  # DescribesModel (rollout/engine.py)
        self.max_batch = max_batch
        self.weights_version = 0
        self.max_len = getattr(model.config, "max_position_embeddings", 1 << 30)
        text_cfg = getattr(model.config, "text_config", None)  # a VLM's context is its text model's
        if text_cfg is not None:
            self.max_len = getattr(text_cfg, "max_position_embeddings", self.max_len)
        self._vision = getattr(model.config, "vision_config", None) is not None

    def load_weights(self, state: Mapping[str, Any], version: int) -> None:
        import torch

        with torch.no_grad():
            self.model.load_state_dict(dict(state), strict=True)
        if state_checksum(self.model.state_dict()) != state_checksum(state):
            raise RuntimeError(f"weight sync v{version}: loaded weights do not match the sent checksum")
        self.weights_version = version

    def generate(self, requests: Sequence[GenRequest]) -> list[Completion]:
        by_params: dict[SamplingParams, list[int]] = defaultdict(list)
        out: dict[tuple[int, int], Completion] = {}
        for i, r in enumerate(requests):
            if r.images and not self._vision:  # an image prompt sent to a text-only model: error, named
                from posttrain.models.vlm import model_name
                from posttrain.rollout.vision import text_only_error

                msg = text_only_error(r, model_name(self.model))
                for k in range(r.params.n):
                    out[(i, k)] = Completion(r.id, k, (), (), "", "error", msg)
                continue
            if len(r.prompt_ids) + r.params.max_new_tokens > self.max_len:
                msg = f"prompt of {len(r.prompt_ids)} tokens + {r.params.max_new_tokens} new exceeds the context of {self.max_len}"
                for k in range(r.params.n):
                    out[(i, k)] = Completion(r.id, k, (), (), "", "error", msg)
                continue
            by_params[r.params].append(i)
        for params, idx in by_params.items():
            rows = [(i, k) for i in idx for k in range(params.n)]
            for s in range(0, len(rows), self.max_batch):
                chunk = rows[s:s + self.max_batch]
                for (i, k), c in zip(chunk, self._generate_batch([requests[i] for i, _ in chunk], params)):
                    out[(i, k)] = Completion(requests[i].id, k, c[0], c[1], c[2], c[3])
        return [out[(i, k)] for i, r in enumerate(requests) for k in range(r.params.n)]

    def _generate_batch(self, reqs: list[GenRequest], p: SamplingParams) -> list[tuple]:
        import torch

        width = max(len(r.prompt_ids) for r in reqs)
        pad = self.tok.pad_token_id
        ids = torch.tensor([[pad] * (width - len(r.prompt_ids)) + list(r.prompt_ids) for r in reqs])  # [B, L]
        mask = torch.tensor([[0] * (width - len(r.prompt_ids)) + [1] * len(r.prompt_ids) for r in reqs])
        if p.seed is not None:
            torch.manual_seed(p.seed)
        sample = p.temperature > 0
        kwargs = dict(do_sample=sample, max_new_tokens=p.max_new_tokens, output_logits=True,
                      return_dict_in_generate=True, pad_token_id=pad, eos_token_id=sorted(self.stop_ids))
        if p.stop:  # saves the compute past a stop string; _finish still finds the exact cut
            kwargs.update(stop_strings=list(p.stop), tokenizer=self.tok)
        if sample:
            kwargs.update(temperature=p.temperature, top_p=p.top_p, top_k=p.top_k or None)
        image_id = getattr(self.model.config, "image_token_id", None) if self._vision else None
        if image_id is not None:  # a sampled placeholder would have no pixels behind it in training
            kwargs["suppress_tokens"] = [image_id]
        if any(r.images for r in reqs):  # image inputs (pixel_values, ...) in row order
            from posttrain.rollout.vision import concat_inputs

            kwargs.update(concat_inputs([d for r in reqs for d in r.images]))
        with torch.no_grad():
            g = self.model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        new = g.sequences[:, width:]  # [B, T]
        logp = torch.stack(g.logits, 1).float().log_softmax(-1)  # [B, T, V]
        tok_lp = logp.gather(-1, new.unsqueeze(-1)).squeeze(-1)  # [B, T]
        return [self._finish(new[b].tolist(), tok_lp[b].tolist(), p) for b in range(len(reqs))]

    def _finish(self, ids: list[int], lps: list[float], p: SamplingParams) -> tuple:
        reason = "length"
        cut = next((i + 1 for i, t in enumerate(ids) if t in self.stop_ids), None)
        if cut is not None:
            ids, lps, reason = ids[:cut], lps[:cut], "stop"
        if p.stop:
            at = self._stop_string_cut(ids, p.stop)
            if at is not None:
                ids, lps, reason = ids[:at], lps[:at], "stop"
        text = self._text(ids)
        cuts = [text.index(s) for s in p.stop if s in text]
        if cuts:
            text = text[: min(cuts)]
        return tuple(ids), tuple(lps), text, reason

    def _text(self, ids: Sequence[int]) -> str:
        return self.tok.decode([t for t in ids if t not in self.stop_ids], skip_special_tokens=True)

    def _stop_string_cut(self, ids: list[int], stop: tuple[str, ...]) -> int | None:
        """The shortest prefix length whose text holds a stop string (binary search: a longer
        prefix's text extends a shorter one's), or None when the text holds none."""
        if not any(s in self._text(ids) for s in stop):
            return None
        lo, hi = 1, len(ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if any(s in self._text(ids[:mid]) for s in stop):
                hi = mid
            else:
                lo = mid + 1
        return lo
