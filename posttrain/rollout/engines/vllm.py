"""`vllm`: optional GPU backend behind the same Engine protocol (extra: `pip install vllm`).

vLLM is imported only when this engine is built. Requests map one to one onto vLLM
requests (`TokensPrompt`, n, temperature, top_p, top_k, seed, stop, max_tokens); logprobs
are vLLM's raw (temperature-1, unwarped) logprob of each sampled token
(`logprobs_mode="raw_logprobs"`), the quantity the trainer recomputes. Deadlines are
enforced by aborting the request; what it had is not returned by vLLM's offline API, so
a deadline returns an empty completion with finish_reason "deadline".

Weight sync: `load_weights(state, version)` pushes `state` into every worker
(`collective_rpc` -> `model.load_weights`), then verifies by a sampled comparison: the
prompt logprobs of a fixed probe sequence under vLLM must match an HF forward of the same
weights within `verify_tol` (bf16: 5e-2 by default). A mismatch raises WeightSyncError.

Limits: GPU only; the vLLM API moves quickly, this targets vLLM >= 0.8 (V1 engine); the
tests for it are skipped unless CUDA and vllm are both present.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from posttrain.errors import ConfigError, ModelError
from posttrain.registry import engine
from posttrain.rollout.engine import Completion, GenRequest
from posttrain.rollout.weight_sync import WeightSyncError

PROBE = tuple(range(3, 67))


def vllm_unsupported_reason(model_cfg: Any) -> str | None:
    """The pure availability check config_check runs before any work: is vllm importable here?
    (find_spec only: importing vllm itself takes seconds and needs CUDA.)"""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return ("engine 'vllm' needs the vllm package, which is not installed: install it with "
                "`pip install vllm` (CUDA GPU only), or use engine 'fast'")
    return None


@engine("vllm", inflight_weights=False, max_batch_arg=False, model_check=vllm_unsupported_reason)  # vllm schedules its own batches
class VLLMEngine:
    def __init__(self, model: Any, tokenizer: Any, model_path: str | None = None, dtype: str = "bfloat16",
                 gpu_memory_utilization: float = 0.6, verify_tol: float = 5e-2, seed: int = 0) -> None:
        try:
            import vllm  # noqa: F401  heavy: only here, never at registration
        except ImportError as e:  # absent, or installed but unloadable (wrong torch/CUDA build)
            why = "is not installed" if isinstance(e, ModuleNotFoundError) and e.name == "vllm" \
                else f"failed to import ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
            raise ConfigError(f"engine 'vllm' needs the vllm package, which {why}: install it with "
                              f"`pip install vllm` (CUDA GPU only), or use engine 'fast'") from None
        from vllm import LLM

        if getattr(tokenizer, "eos_token_id", None) is None:
            raise ModelError("tokenizer has no EOS token (eos_token_id is None): generation could never stop")
        path = model_path or getattr(model, "name_or_path", None)
        if not path:
            raise ConfigError("engine 'vllm' needs model_path (an HF checkpoint directory vLLM can load)")
        self.hf, self.tok, self.tol = model, tokenizer, verify_tol
        self.llm = LLM(model=path, dtype=dtype, gpu_memory_utilization=gpu_memory_utilization, seed=seed,
                       enable_prefix_caching=True, logprobs_mode="raw_logprobs")
        self.max_len = self.llm.llm_engine.model_config.max_model_len
        self.weights_version = 0

    def generate(self, requests: Sequence[GenRequest]) -> list[Completion]:
        from vllm import SamplingParams as VSP
        from vllm.inputs import TokensPrompt

        done: dict[tuple[int, int], Completion] = {}
        live = []
        for i, r in enumerate(requests):
            if len(r.prompt_ids) >= self.max_len or not r.prompt_ids:
                msg = f"prompt of {len(r.prompt_ids)} tokens does not fit the context of {self.max_len} tokens"
                done.update({(i, k): Completion(r.id, k, (), (), "", "error", msg) for k in range(r.params.n)})
            else:
                live.append(i)
        p = [requests[i].params for i in live]
        sps = [VSP(n=q.n, temperature=q.temperature, top_p=q.top_p, top_k=q.top_k or -1, seed=q.seed,
                   stop=list(q.stop), max_tokens=q.max_new_tokens, logprobs=0) for q in p]
        t0 = time.monotonic()
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(requests[i].prompt_ids)) for i in live], sps,
                                 use_tqdm=False)
        for i, o in zip(live, outs):
            r = requests[i]
            late = r.deadline_s is not None and time.monotonic() - t0 > r.deadline_s
            for k, c in enumerate(o.outputs):
                if late:
                    done[(i, k)] = Completion(r.id, k, (), (), "", "deadline")
                    continue
                lps = tuple(float(d[t].logprob) for t, d in zip(c.token_ids, c.logprobs))
                reason = "stop" if c.finish_reason == "stop" else "length"
                done[(i, k)] = Completion(r.id, k, tuple(c.token_ids), lps, c.text, reason)
        return [done[(i, k)] for i, r in enumerate(requests) for k in range(r.params.n)]

    def load_weights(self, state: Mapping[str, Any], version: int) -> None:
        import torch

        items = [(k, v.detach().cpu()) for k, v in state.items()]

        def _push(worker: Any, weights: list) -> int:
            worker.model_runner.model.load_weights(iter(weights))
            return len(weights)

        self.llm.collective_rpc(_push, args=(items,))
        self.hf.load_state_dict(dict(state), strict=False)
        with torch.no_grad():
            ids = torch.tensor([PROBE], device=next(self.hf.parameters()).device)
            ref = self.hf(ids).logits.float().log_softmax(-1)[0, :-1].gather(-1, ids[0, 1:, None])[:, 0].cpu()
        from vllm import SamplingParams as VSP
        from vllm.inputs import TokensPrompt

        out = self.llm.generate([TokensPrompt(prompt_token_ids=list(PROBE))],
                                VSP(max_tokens=1, prompt_logprobs=0), use_tqdm=False)[0]
        got = torch.tensor([float(d[t].logprob) for t, d in zip(PROBE[1:], out.prompt_logprobs[1:])])
        err = (got - ref).abs().max().item()
        if err > self.tol:
            self.weights_version = -1
            raise WeightSyncError(f"weight sync v{version}: vllm probe logprobs differ from the sent weights by {err:.3g}")
        self.weights_version = version
