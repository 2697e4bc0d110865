"""`fast`: the default engine. Our own forward, paged prefix cache, continuous batching.

    eng = FastEngine(model, tokenizer, max_batch=256, speculative="ngram")
    outs = eng.generate([GenRequest(ids, SamplingParams(temperature=1.0, n=8))])
    conv = eng.conversation(ids); conv.generate(params); conv.append(tool_ids)  # multi-turn

Each `generate` call runs one scheduling loop: waiting samples are admitted into free
lanes at every step (a request's n samples prefill their prompt once, prefill.py),
all running lanes decode together (or speculate, speculative.py), and finished samples
leave at once (EOS, max tokens, stop string, deadline), their slot refilled the next step.
Sampling parameters and seeds are per request (sampling.py). Bad requests (prompt longer
than the context, empty prompt, token ids outside the vocabulary, non-finite sampling
parameters) come back as a Completion with finish_reason "error", never failing the batch.

Architectures: Llama (incl. tied, SmolLM2), Mistral, Qwen2, Qwen3 and Gemma 3 text models
(arch.py); any other config is refused at construction with a ModelError naming the
feature, and `fast_model.check_supported(config_json_dict)` gives the same line up front.

In-flight weight updates (rl.partial_rollouts): `set_weight_source(fn)` makes every generate
call poll `fn()` between decode steps; a newer (version, state) it returns is installed at
once, verified as load_weights does, and the batch goes on: running sequences keep the KV
their earlier tokens made (PipelineRL-style, not recomputed), their later tokens are sampled
under the new weights, and each token's version comes back in Completion.token_versions.

`matmul_dtype="bfloat16"` runs the weight matmuls in bf16 (AMX / AVX512-BF16 on CPU, ~4x
fp32) with activations, KV, attention and sampling in fp32; logprobs then differ from the
fp32 model's by bf16 rounding (tests/unit/rollout/test_fast_matmul_dtype.py states the bound).
`matmul_dtype="auto"` measures once which of bf16 and fp32 this machine runs faster
(matmul_choice.py) and uses it; `self.matmul_dtype` names the choice. In RL, a bf16 engine's
logprobs are not the behaviour policy's: `rl.old_logprobs: recompute` (train/update.py) takes
fp32 ones from the trainer instead, and config load refuses bf16 rollouts without it.

Limits: one process, one device; a step is never preempted, so a deadline is honoured at
step granularity. The KV of a prompt shared across calls is reused only while the
weights are unchanged (load_weights clears the store). On GPU, `cuda_graphs=True` pads
the decode batch to buckets and compiles the decode step (torch.compile,
"reduce-overhead"); it is exercised only by tests marked `gpu`.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from typing import Any, Callable, Mapping, Sequence

import torch

from posttrain.errors import ConfigError, ModelError
from posttrain.models.vlm import model_name
from posttrain.registry import engine, registry
from posttrain.rollout.engine import Completion, GenRequest
from posttrain.rollout.engines.fast import speculative as _speculators  # noqa: F401  registers 'ngram', 'draft'
from posttrain.rollout.engines.fast.kv_cache import PagedStore
from posttrain.rollout.engines.fast.lane_budget import LaneBudget
from posttrain.rollout.engines.fast.matmul_choice import resolve_matmul_dtype, say_choice
from posttrain.rollout.engines.fast.model import FastLM, check_supported
from posttrain.rollout.engines.fast.prefill import PrefillStats, prefill
from posttrain.rollout.engines.fast.sampling import RowParams, sample
from posttrain.rollout.engines.fast.seq import Finisher, Seq
from posttrain.rollout.engines.fast.streaming import Streaming, _Waiting
from posttrain.rollout.engines.fast.vision import ImageEncoder, is_vlm
from posttrain.rollout.tokenizer_checks import stop_token_ids
from posttrain.rollout.vision import text_only_error
from posttrain.rollout.weight_sync import SyncReport, WeightSyncError, install


MATMUL_DTYPES = ("bfloat16", "float16", "float32", "auto")


# model_check: config.json dict -> None, or the one line saying what `fast` cannot run (config_check, at load)
@engine("fast", inflight_weights=True, max_batch_arg=True, model_check=check_supported)
class FastEngine(Streaming, LaneBudget):
    """Engine, EngineInfo, WeightReceiver, InflightWeights and StreamingEngine (rollout/engine.py);
    the streaming half is streaming.py."""

    def __init__(self, model: Any, tokenizer: Any, max_batch: int = 256, max_model_len: int | None = None,
                 block_size: int = 16, cache_mb: float = 64.0, cache_outputs: bool = True,
                 speculative: str | None = None, num_draft: int = 4, draft_model: Any = None, ngram_max: int = 3,
                 device: str | None = None, dtype: str | None = None, cuda_graphs: bool = False,
                 prefill_tokens: int = 8192, seed: int = 0, ignore_eos: bool = False,
                 static_decode: bool = False, kv_mb: float = 4096.0, matmul_dtype: str | None = None) -> None:
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is None:
            raise ModelError("tokenizer has no EOS token (eos_token_id is None): generation could never stop; "
                             "set tokenizer.eos_token before building the engine")
        for name, val in (("max_batch", max_batch), ("block_size", block_size), ("num_draft", num_draft),
                          ("ngram_max", ngram_max), ("prefill_tokens", prefill_tokens)):
            if not isinstance(val, int) or val < 1:
                raise ConfigError(f"engine.args.{name} must be an integer >= 1, got {val!r}")
        for name, mb in (("kv_mb", kv_mb), ("cache_mb", cache_mb)):  # a str ("1e3" from YAML) fails here, named
            if not (isinstance(mb, (int, float)) and not isinstance(mb, bool) and math.isfinite(mb) and mb > 0):
                raise ConfigError(f"engine.args.{name} must be a number of MiB > 0, got {mb!r}")
        tdtype = getattr(torch, dtype) if dtype else None
        self.lm = FastLM.from_hf(model, tdtype, device, max_len=max_model_len)  # ModelError if unsupported
        if matmul_dtype is not None:  # bfloat16: weight matmuls on AMX / AVX512-BF16, the rest fp32
            if matmul_dtype not in MATMUL_DTYPES:
                raise ConfigError(f"engine.args.matmul_dtype must be one of {sorted(MATMUL_DTYPES)}, got {matmul_dtype!r}")
            if matmul_dtype == "auto":  # measured once per process (matmul_choice.py); said once on stderr
                matmul_dtype = resolve_matmul_dtype(matmul_dtype, self.lm.device)
                say_choice(matmul_dtype)
            self.lm.set_matmul_dtype(getattr(torch, matmul_dtype))
        self.matmul_dtype = matmul_dtype or "float32"  # what the weight matmuls run in (auto resolved)
        self.tok = tokenizer
        # EOS, generation_config EOS ids and the chat template's end-of-turn token (tokenizer_checks.py)
        self.finisher = Finisher(tokenizer, set() if ignore_eos else stop_token_ids(tokenizer, model))
        s = self.lm.shape
        self.max_len = min(s.max_pos, max_model_len or s.max_pos)
        self.max_batch, self.prefill_tokens, self.cache_outputs = max_batch, prefill_tokens, cache_outputs
        self.kv_token_bytes = 2 * s.layers * s.kv_heads * s.head_dim * self.lm.embed.element_size()  # K+V, all layers
        self.kv_bytes = int(kv_mb * 2**20)  # what the decode lanes may hold (`_phases`, `_ensure_lanes`)
        per_block = self.kv_token_bytes * block_size
        self.store = PagedStore(s.layers, s.kv_heads, s.head_dim, max(1, int(cache_mb * 2**20 // per_block)),
                                block_size, self.lm.dtype, self.lm.device)
        self.vision = ImageEncoder.from_hf(model) if is_vlm(model) else None  # LLaVA-style VLM: images
        self._views = {**self.lm.views, **(self.vision.views if self.vision else {})}
        self.model_label = model_name(model)  # DescribesModel: named in the error for an image prompt
        self._feats: dict[int, torch.Tensor] = {}  # request index -> image features, this generate call
        if speculative is not None and self.vision is not None:
            raise ConfigError("speculative decoding is not supported with a vision-language model in the fast engine")
        self.spec = None if speculative is None else registry("speculator").get(speculative)(
            self, num_draft=num_draft, draft_model=draft_model, ngram_max=ngram_max)
        self._static = None  # StaticDecoder when CUDA graphs are on (cuda.py)
        self._static_opts = (cuda_graphs and self.lm.device.type == "cuda") or static_decode
        self._rng = random.Random(seed)
        self.weights_version = 0
        self.last_sync: SyncReport | None = None
        self.lanes = None
        self.active: list[Seq] = []
        self._rp: RowParams | None = None
        self._shared = None  # per-row shared-prompt lanes for the fused CPU decode; None = recompute
        self._groups = 0  # kv_group ids handed out
        self.prefill_stats = PrefillStats()
        self.counters = dict(decode_steps=0, decode_s=0.0, tokens=0, prefill_s=0.0, inflight_updates=0)
        self._conversations: set[Any] = set()
        self._lock = threading.Lock()  # generate/load_weights may be called from worker threads
        self._source: Callable[[], tuple[int, Mapping[str, Any]] | None] | None = None  # set_weight_source

    # ---- public API -----------------------------------------------------------------------
    def generate(self, requests: Sequence[GenRequest]) -> list[Completion]:
        with self._lock:  # one scheduling loop at a time: lanes and the store are shared state
            return self._generate(requests)

    def _generate(self, requests: Sequence[GenRequest]) -> list[Completion]:
        if self.weights_version < 0:
            raise WeightSyncError("engine weights are invalid after a failed sync; reload them with load_weights")
        t0 = time.monotonic()
        done: dict[tuple[int, int], Completion] = {}
        queue: deque[_Waiting] = deque()
        self._feats = {}
        for i, r in enumerate(requests):
            err = self._check(r) or (self._encode_images(i, r) if r.images else "")
            if err:
                for k in range(r.params.n):
                    done[(i, k)] = Completion(r.id, k, (), (), "", "error", err)
            else:
                dl = None if r.deadline_s is None else t0 + r.deadline_s
                queue.append(_Waiting(i, list(range(r.params.n)), dl))
        self._seeds = {w.req: (requests[w.req].params.seed if requests[w.req].params.seed is not None
                               else self._rng.getrandbits(62)) for w in queue}
        for phase in self._phases(requests, queue):
            self._ensure_lanes(requests, phase)
            while phase or self.active:
                if self._source is not None:
                    self._poll_weights()
                self._expire(phase, requests, done)
                self._admit(phase, requests, done)
                if self.active:
                    self._step(done)
        if self.lanes is not None and not self._static_opts and \
                self._lane_bytes(self.lanes.n, self.lanes.cap) > self.kv_bytes // 4:
            self.lanes = None  # big lanes go back between calls (an RL update needs the memory); small stay
        return [done[(i, k)] for i, r in enumerate(requests) for k in range(r.params.n)]

    @property
    def stop_ids(self) -> tuple[int, ...]:
        """The token ids that end a turn (EOS, generation_config's, the chat template's end-of-turn)."""
        return tuple(sorted(self.finisher.eos))

    def inflight_updates(self) -> int:
        return int(self.counters["inflight_updates"])

    def set_weight_source(self, source: Callable[[], tuple[int, Mapping[str, Any]] | None] | None) -> None:
        """Poll `source()` between decode steps (None: stop); see the module docstring."""
        self._source = source

    def _poll_weights(self) -> None:
        got = self._source()
        if got is None or got[0] <= self.weights_version:
            return
        # (version, state) from the same process, or (version, state, manifest) from a Ray
        # worker's offer: checked against the trainer's digests. A WeightSyncError fails the call.
        self._load_weights(got[1], got[0], got[2] if len(got) > 2 else None)
        for s in self.active:
            s.vsplits.append((len(s.out), got[0]))
        self.counters["inflight_updates"] += 1

    def load_weights(self, state: Mapping[str, Any], version: int, manifest: Mapping[str, str] | None = None
                     ) -> SyncReport:
        """Install HF-named `state` as `version`, verify every tensor, drop stale KV."""
        with self._lock:
            return self._load_weights(state, version, manifest)

    def _load_weights(self, state: Mapping[str, Any], version: int, manifest: Mapping[str, str] | None
                      ) -> SyncReport:
        try:
            rep = install(self._views, state, version, manifest,
                          tied=("lm_head.weight", self.lm.prefix + "embed_tokens.weight") if self.lm.tied else None)
        except WeightSyncError:
            self.weights_version = -1  # partially installed: refuse to generate until a full reload
            raise
        self._commit_weights(rep)
        return rep

    def begin_weights(self, version: int, lock: bool = True) -> Any:
        """A sync in buckets (weight_sync.BucketedInstall): no second full copy anywhere."""
        from posttrain.rollout.weight_sync import BucketedInstall

        return BucketedInstall(self, version, lock)

    def _commit_weights(self, rep: SyncReport) -> None:
        """New weights are in: the KV cache and every conversation's prefix belong to the old."""
        changed = None if rep.changed is None else [self._views[k] for k in rep.changed if k in self._views]
        self.lm.refresh_matmul_weights(changed)  # a tied head's matmul_dtype copy follows the embedding
        self.store.clear()
        for c in list(self._conversations):
            c._invalidate()
        self.weights_version = rep.version
        self.last_sync = rep

    def conversation(self, prompt_ids: Sequence[int] = ()) -> Any:
        from posttrain.rollout.engines.fast.session import Conversation

        return Conversation(self, prompt_ids)

    def stats(self) -> dict[str, float]:
        c = dict(self.counters)
        c["prefix_cache_hit_rate"] = self.prefill_stats.hit_rate
        c["prompt_tokens"] = self.prefill_stats.prompt_tokens
        c["prefill_computed_tokens"] = self.prefill_stats.computed_tokens
        c.update({f"store_{k}": v for k, v in self.store.stats.as_dict().items()})
        if self.spec is not None:
            c.update(self.spec.stats())
        if self.last_sync is not None:
            c["sync_s"] = self.last_sync.total_s
        return c

    # ---- validation and setup -------------------------------------------------------------
    def _check(self, r: GenRequest) -> str:
        p, n = r.params, len(r.prompt_ids)
        if n == 0:
            return "empty prompt: at least one token is needed to condition on"
        if r.images and self.vision is None:
            return text_only_error(r, self.model_label)
        if n >= self.max_len:
            return f"prompt of {n} tokens does not fit the context of {self.max_len} tokens (needs room for 1 new)"
        bad = [t for t in r.prompt_ids if not 0 <= t < self.lm.shape.vocab]
        if bad:
            return f"prompt token id {bad[0]} is outside the vocabulary [0, {self.lm.shape.vocab})"
        if not (math.isfinite(p.temperature) and p.temperature >= 0):
            return f"temperature must be a finite number >= 0, got {p.temperature}"
        if not (math.isfinite(p.top_p) and 0 < p.top_p <= 1):
            return f"top_p must be in (0, 1], got {p.top_p}"
        if p.top_k < 0 or p.max_new_tokens < 1 or p.n < 1:
            return f"top_k must be >= 0, max_new_tokens >= 1 and n >= 1, got {p.top_k}, {p.max_new_tokens}, {p.n}"
        if any(not s for s in p.stop):
            return "stop strings must be non-empty"
        return ""

    # ---- scheduling -----------------------------------------------------------------------
    def _expire(self, queue: deque, requests: Sequence[GenRequest], done: dict) -> None:
        now = time.monotonic()
        for w in list(queue):
            if w.deadline is not None and now >= w.deadline:
                queue.remove(w)
                for k in w.samples:
                    done[(w.req, k)] = Completion(requests[w.req].id, k, (), (), "", "deadline")

    def _admit(self, queue: deque, requests: Sequence[GenRequest], done: dict) -> None:
        """Move waiting samples into free lanes; prefill each admitted prompt once."""
        free = min(self.lanes.n, self.max_batch) - len(self.active)
        chunks: list[tuple[_Waiting, list[int]]] = []
        budget = self.prefill_tokens
        while queue and free > 0 and (not chunks or budget >= len(requests[queue[0].req].prompt_ids)):
            w = queue[0]
            take = w.samples[:free]
            del w.samples[:free]
            if not w.samples:
                queue.popleft()
            chunks.append((w, take))
            free -= len(take)
            budget -= len(requests[w.req].prompt_ids)
        if not chunks:
            return
        t0 = time.perf_counter()
        row0 = len(self.active)
        prompts = [tuple(requests[w.req].prompt_ids) for w, _ in chunks]
        images = [(self.vision.image_token_id, self._feats[w.req]) if w.req in self._feats else None for w, _ in chunks]
        logits = prefill(self.lm, self.lanes, self.store, prompts, [len(t) for _, t in chunks], row0,
                         self.prefill_stats, images)  # [R, V]
        new: list[Seq] = []
        for (w, take), p in zip(chunks, prompts):
            r = requests[w.req]
            self._groups += 1  # this chunk's lanes got their prompt KV from one scratch row
            for k in take:
                new.append(Seq(w.req, k, r.id, p, r.params, self._seeds[w.req], w.deadline,
                               min(r.params.max_new_tokens, self.max_len - len(p)), pos=len(p), draft_pos=len(p),
                               kv_group=self._groups, images=bool(r.images), vsplits=[(0, self.weights_version)]))
        rows = torch.repeat_interleave(torch.arange(len(chunks)), torch.tensor([len(t) for _, t in chunks]))
        rp = self._row_params(new)
        tok, lp = self._sample(logits[rows.to(logits.device)], rp, torch.tensor([s.pos for s in new], device=logits.device))
        if self.spec is not None:
            self.spec.admit(new, row0, prompts, [len(t) for _, t in chunks])
        self.active.extend(new)
        self._rp = self._shared = None
        self.counters["prefill_s"] += time.perf_counter() - t0
        self._push([(s, [t], [l]) for s, t, l in zip(new, tok.tolist(), lp.tolist())], done)

    def _step(self, done: dict) -> None:
        t0 = time.perf_counter()
        if self.spec is not None:
            emitted = self.spec.step(self.active)
        else:
            emitted = self._decode()
        self.counters["decode_steps"] += 1
        self.counters["decode_s"] += time.perf_counter() - t0
        self._push(emitted, done)

    def _decode(self) -> list[tuple[Seq, list[int], list[float]]]:
        act = self.active
        dev = self.lm.device
        tokens = torch.tensor([s.last for s in act], device=dev)[:, None]  # [n, 1]
        start = torch.tensor([s.pos for s in act], device=dev)  # [n]
        if self._static is not None:
            logits = self._static.logits(tokens, start)
        else:
            logits = self.lm.logits(self.lm.forward(tokens, start, self.lanes, shared=self.shared_prefix())[:, 0])
        sampler = self._static.sample if self._static is not None else self._sample
        tok, lp = sampler(logits, self.row_params(), start + 1)
        out = []
        for s, t, l in zip(act, tok.tolist(), lp.tolist()):
            s.pos += 1
            out.append((s, [t], [l]))
        return out

    def _push(self, emitted: list[tuple[Seq, list[int], list[float]]], done: dict) -> None:
        """Record emitted tokens; retire finished lanes, compacting the survivors downwards."""
        now = time.monotonic()
        finished = []
        push, n = self.finisher.push, 0
        for s, toks, lps in emitted:
            n += len(toks)
            if push(s, toks, lps, now):
                finished.append(s)
            else:
                s.last = s.out[-1]
        self.counters["tokens"] += n
        if not finished:
            return
        index = {id(s): i for i, s in enumerate(self.active)}
        for i in sorted((index[id(s)] for s in finished), reverse=True):
            s = self.active[i]
            # a turn that may be continued; KV made under two weights versions is not a cache entry
            if self.cache_outputs and s.params.n == 1 and not s.images and len(s.vsplits) == 1:
                self.store.insert(s.tokens[: s.pos], self.lanes.k, self.lanes.v, i)
            done[(s.req, s.sample)] = self.finisher.render(s)
            last = len(self.active) - 1
            if i != last:
                self.lanes.move(last, i)
                if self.spec is not None:
                    self.spec.move(last, i)
                self.active[i] = self.active[last]
            self.active.pop()
        self._rp = self._shared = None

    def shared_prefix(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per active row: the first active lane of its kv_group (whose prompt KV is a bit-identical
        copy of the row's own), the prompt length, and a visiting order with each group's rows
        together; recomputed only when the active set changes."""
        if self._shared is None:
            first: dict[int, int] = {}
            src, shared = [], []
            for i, s in enumerate(self.active):
                src.append(first.setdefault(s.kv_group, i) if s.kv_group >= 0 else i)
                shared.append(len(s.prompt) if s.kv_group >= 0 else 0)
            src_t = torch.tensor(src, dtype=torch.int64)
            self._shared = (src_t, torch.tensor(shared, dtype=torch.int64), torch.argsort(src_t, stable=True))
        return self._shared

    def _encode_images(self, i: int, r: GenRequest) -> str:
        """Image features of request i for its prefill, or an error naming the request."""
        try:
            feats = self.vision.features(r.images, self.lm.dtype, self.lm.device)
        except Exception as e:  # noqa: BLE001 - a bad image input fails its request, never the batch
            return f"request {r.id}: image inputs could not be encoded ({type(e).__name__}: {e})"
        slots = sum(t == self.vision.image_token_id for t in r.prompt_ids)
        if slots != feats.shape[0]:
            return f"request {r.id}: {slots} image placeholder tokens but the images give {feats.shape[0]} features"
        self._feats[i] = feats
        return ""

    def _sample(self, logits: torch.Tensor, rp: RowParams, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`sample`, except that a VLM never samples its image placeholder (it would have no pixels
        behind it in training); logprobs stay those of the raw logits, as the trainer recomputes."""
        if self.vision is None:
            return sample(logits, rp, pos)
        masked = logits.clone()
        masked[:, self.vision.image_token_id] = float("-inf")
        tok, _ = sample(masked, rp, pos)
        return tok, logits.log_softmax(-1).gather(-1, tok[:, None])[:, 0]

    def row_params(self) -> RowParams:
        if self._rp is None:
            self._rp = self._row_params(self.active)
        return self._rp

    def _row_params(self, seqs: list[Seq]) -> RowParams:
        return RowParams.build([s.params.temperature for s in seqs], [s.params.top_p for s in seqs],
                               [s.params.top_k for s in seqs], [s.seed for s in seqs], [s.sample for s in seqs],
                               self.lm.device)
