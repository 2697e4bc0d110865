"""Per-rank memory and communication accounting, logged with every sharded step.

    with CommMeter() as m: ...         # every c10d / functional collective issued by this rank
    m.sent_bytes                        # ring-algorithm bytes this rank sends
    predict_sent_bytes(hf_config, dp, tp, forwards, 4, 4)   # the FSDP + TP model of the same

Measured: a TorchDispatchMode sees each collective FSDP2 (c10d all-gather/reduce-scatter)
and DTensor TP (functional all-reduce) issue, with its real tensors and group; per-rank
bytes sent follow the ring algorithms: all-gather and reduce-scatter (n-1)/n of the full
buffer, all-reduce 2(n-1)/n, broadcast the buffer. Predicted (`predict_sent_bytes`): from
the model's shape alone, per micro-batch forward of T tokens:
    FSDP: (dp-1)/dp * [ (L*P_layer/tp + P_root) * (2 gathers fwd+bwd for layers, 1 for root) * param_bytes
                        + (L*P_layer/tp + P_root) * reduce_bytes ]
    TP:   2(tp-1)/tp * T*H*act_bytes * (2 forward + 5 backward all-reduces per layer)
    and per forward of the frozen KL reference: its parameters gathered once, 2 all-reduces per layer.
Memory: parameter, gradient and optimiser bytes are the local shards' sizes; activation
bytes are the tensors saved for backward during one forward (distinct storages).

Limits: wire bytes of the backend itself (gloo's pairwise exchange, NCCL's tree) are not
read; the ring figures are what a bandwidth-optimal backend sends. Saved-for-backward
bytes include the gathered weights FSDP keeps for the backward of the root module.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _group_size(func: Any, args: tuple) -> int:
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _resolve_process_group

    for a in args:
        if isinstance(a, dist.ProcessGroup):
            return a.size()
        if isinstance(a, str) and func.namespace == "_c10d_functional":
            try:
                return _resolve_process_group(a).size()
            except Exception:  # noqa: BLE001
                continue
        if isinstance(a, torch.ScriptObject):
            try:
                return dist.ProcessGroup.unbox(a).size()
            except Exception:  # noqa: BLE001
                continue
    return 1


def _tensors(args: Any) -> list[torch.Tensor]:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += _tensors(a)
    return out


class CommMeter(TorchDispatchMode):
    """Counts the bytes this rank sends in collectives while entered (and token counts per forward)."""

    def __init__(self) -> None:
        super().__init__()
        self.reset()

    def reset(self) -> None:
        self.sent_bytes = 0.0
        self.calls = 0
        self.forwards: list[int] = []  # tokens of each micro-batch forward on this rank
        self.ref_forwards: list[int] = []  # the same for the KL reference model (forward only)

    def start_step(self) -> None:
        self.reset()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ns = func.namespace
        if ns in ("c10d", "_c10d_functional"):
            name = func.__name__.lower()
            ts = _tensors(args)
            n = _group_size(func, args)
            if ts and n > 1 and "wrap_tensor" not in name:
                big = max(t.numel() * t.element_size() for t in ts)
                if "allgather" in name or "all_gather" in name or "reduce_scatter" in name:
                    self.sent_bytes += big * (n - 1) / n
                elif "allreduce" in name or "all_reduce" in name:
                    self.sent_bytes += 2 * big * (n - 1) / n
                elif "broadcast" in name:
                    self.sent_bytes += big
                self.calls += 1
        return func(*args, **(kwargs or {}))


def layer_params(c: Any) -> tuple[int, int]:
    """(parameters of one decoder layer that TP splits, those it replicates)."""
    hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    h, i = c.hidden_size, c.intermediate_size
    split = h * c.num_attention_heads * hd * 2 + h * c.num_key_value_heads * hd * 2 + 3 * h * i
    return split, 2 * h


def root_params(c: Any) -> int:
    emb = c.vocab_size * c.hidden_size
    return emb * (1 if getattr(c, "tie_word_embeddings", False) else 2) + c.hidden_size


def predict_sent_bytes(c: Any, dp: int, tp: int, forwards: list[int], param_bytes: int, reduce_bytes: int,
                       act_bytes: int = 4, ref_forwards: list[int] = ()) -> dict[str, float]:
    """Bytes one rank sends for a step with these micro-batch forwards (tokens each).
    `ref_forwards`: forwards of the frozen KL reference: one gather of every parameter and the
    2 forward all-reduces per layer, no backward."""
    split, rep = layer_params(c)
    layer = split / tp + rep
    L, root = c.num_hidden_layers, root_params(c)
    f = (dp - 1) / dp
    fsdp = len(forwards) * f * ((2 * L * layer + root) * param_bytes + (L * layer + root) * reduce_bytes)
    fsdp += len(ref_forwards) * f * (L * layer + root) * param_bytes
    tpb = sum(2 * (tp - 1) / tp * t * c.hidden_size * act_bytes * 7 * L for t in forwards)
    tpb += sum(2 * (tp - 1) / tp * t * c.hidden_size * act_bytes * 2 * L for t in ref_forwards)
    return {"fsdp": fsdp, "tp": tpb, "total": fsdp + tpb}


def local_bytes(tensors: Any) -> int:
    from torch.distributed.tensor import DTensor

    total = 0
    for t in tensors:
        if t is None:
            continue
        loc = t.to_local() if isinstance(t, DTensor) else t
        total += loc.numel() * loc.element_size()
    return total


def memory_bytes(model: Any, opt: Any) -> dict[str, int]:
    params = [p for p in model.parameters()]
    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v.dim() > 0]
    return {"param_bytes": local_bytes(params), "grad_bytes": local_bytes(p.grad for p in params),
            "optim_bytes": local_bytes(state)}


class SavedBytes:
    """Bytes of the tensors autograd saves for backward while entered (distinct storages)."""

    def __init__(self) -> None:
        self.bytes = 0
        self._seen: set[int] = set()

    def __enter__(self) -> "SavedBytes":
        def pack(t: torch.Tensor) -> torch.Tensor:
            try:
                key = t.untyped_storage().data_ptr()
                if key not in self._seen:
                    self._seen.add(key)
                    self.bytes += t.untyped_storage().nbytes()
            except Exception:  # noqa: BLE001 - a tensor without storage (a DTensor wrapper)
                pass
            return t
        self._ctx = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)


def step_accounting(ctx: Any) -> dict[str, float]:
    """The metrics row of the last step on this rank (rank 0's, reported by the driver)."""
    from posttrain.parallel.mesh import dp_info

    m = ctx.meter
    _, dp = dp_info(ctx.mesh)
    pb = 2 if ctx.opts.param_dtype() is not None else next(ctx.model.parameters()).element_size()
    pred = predict_sent_bytes(ctx.model.config, dp, ctx.opts.tp, m.forwards, pb, 4, 2 if pb == 2 else 4,
                              m.ref_forwards)
    row = {f"shard/{k}": float(v) for k, v in memory_bytes(ctx.model, ctx.opt).items()}
    if ctx.ref is not None:
        row["shard/ref_param_bytes"] = float(local_bytes(ctx.ref.parameters()))
    row.update({"shard/activation_bytes": float(ctx.extra.get("activation_bytes", 0)),
                "shard/sent_bytes": m.sent_bytes, "shard/sent_bytes_predicted": pred["total"],
                "shard/collectives": float(m.calls)})
    return row
