"""The `fast` engine's own transformer forward, built from a Hugging Face causal LM's weights.

`FastLM.from_hf(model)` copies the weights of a Llama, Mistral, Qwen2, Qwen3 or Gemma 3
(text) model into a few fused matrices (q|k|v in one, gate|up in one) and runs the forward
with plain tensor ops: no module tree, no per-layer hooks, no mask/cache objects. On a
2-core CPU the HF forward of a 0.5M-parameter model spends most of its time in Python;
this one spends it in matrix products.

Per-architecture behaviour (q/k norms, Gemma's norms and GELU, sliding-window layers, per
layer-type rope tables, query scale, logit softcapping) is described by fast_arch.Arch;
`check_supported(config_dict)` says, before any work, why a model cannot run here (an
unsupported config raises `ModelError` with that line at construction). Also supported:
GQA, q/k/v and o biases, `mlp_bias`, tied embeddings, explicit `head_dim`.

Sliding-window layers keep every position in their lanes (no ring buffer) and mask keys
older than the window: memory as for a global layer, compute only over the window.

The KV working set is `Lanes`: per layer a dense [N, kvh, Lcap, D] buffer, one row
("lane") per running sequence. The engine's block-paged store (kv_cache.py) holds the
shareable prefixes and copies them into lanes once per admission; see kv_cache.py for why
decode reads lanes rather than gathering blocks every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from posttrain.rollout.engines.fast import cpu_kernels
from posttrain.rollout.engines.fast.arch import SUPPORTED, Arch, arch_of, check_supported
from posttrain.rollout.engines.fast.vision import TEXT_PREFIX, is_vlm

__all__ = ["FastLM", "Lanes", "Shape", "SUPPORTED", "check_supported"]

# decode and speculative verification (T new tokens per row, T <= this) use the fused CPU
# kernel; prefill (long T) stays with matmul, which is efficient there
FUSED_MAX_T = 16
# each layer's weight matrices (fused layout): what `set_matmul_dtype` runs, and holds, in its dtype
MATRICES = ("wqkv", "wo", "wgu", "wd")
# per decode row: (lane holding the shared prefix [B], prefix length [B], visiting order [B] or None)
SharedPrefix = tuple[torch.Tensor, torch.Tensor, "torch.Tensor | None"]
Rope = tuple[torch.Tensor, torch.Tensor]  # cos, sin [max_pos, D]


@dataclass
class Shape:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    eps: float
    max_pos: int

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads


def _shape(cfg: Any, max_len: int | None = None) -> Shape:
    heads = cfg.num_attention_heads
    kvh = getattr(cfg, "num_key_value_heads", None) or heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    max_pos = min(cfg.max_position_embeddings, max_len or cfg.max_position_embeddings)
    return Shape(cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers, heads, kvh, hd,
                 cfg.intermediate_size, float(cfg.rms_norm_eps), max_pos)


class Lanes:
    """Dense per-sequence KV working set: k[l], v[l] are [N, kvh, Lcap, D]."""

    def __init__(self, shape: Shape, n: int, cap: int, dtype: torch.dtype, device: torch.device) -> None:
        dims = (n, shape.kv_heads, cap, shape.head_dim)
        self.k = [torch.zeros(dims, dtype=dtype, device=device) for _ in range(shape.layers)]
        self.v = [torch.zeros(dims, dtype=dtype, device=device) for _ in range(shape.layers)]
        self.n, self.cap = n, cap

    def move(self, src: int, dst: int) -> None:
        """Copy lane `src` into lane `dst` (compaction after a sequence leaves)."""
        for t in self.k + self.v:
            t[dst].copy_(t[src])

    def copy_from(self, src: "Lanes", src_rows: torch.Tensor, dst0: int, length: int) -> None:
        """Lanes dst0..dst0+M get rows `src_rows` ([M] ids) of `src`, first `length` positions."""
        m = src_rows.numel()
        for d, s in zip(self.k + self.v, src.k + src.v):
            d[dst0:dst0 + m, :, :length] = s[src_rows, :, :length]


class FastLM:
    """Weights in fused layout plus the forward. Parameters are views HF names map onto."""

    def __init__(self, shape: Shape, dtype: torch.dtype, device: torch.device, ropes: dict[str | None, Rope],
                 qkv_bias: bool, mlp_bias: bool, o_bias: bool, tied: bool, prefix: str = "model.",
                 arch: Arch | None = None) -> None:
        s, f = shape, dict(dtype=dtype, device=device)
        self.shape, self.dtype, self.device, self.tied, self.prefix = s, dtype, device, tied, prefix
        self.arch = arch or Arch(False, False, float(s.head_dim) ** -0.5, (None,) * s.layers, (None,) * s.layers,
                                 None, None)
        a = self.arch
        qkv = (s.heads + 2 * s.kv_heads) * s.head_dim
        self.embed = torch.zeros(s.vocab, s.hidden, **f)
        self.lm_head = self.embed if tied else torch.zeros(s.vocab, s.hidden, **f)
        self.final_norm = torch.zeros(s.hidden, **f)
        # HF multiplies the embedding by sqrt(hidden) cast to the weights' dtype
        self.embed_scale = None if a.embed_scale is None else torch.tensor(a.embed_scale).to(dtype)
        self.layers = []
        for _ in range(s.layers):
            L = dict(in_norm=torch.zeros(s.hidden, **f), ff_norm=torch.zeros(s.hidden, **f),
                     wqkv=torch.zeros(qkv, s.hidden, **f), bqkv=torch.zeros(qkv, **f) if qkv_bias else None,
                     wo=torch.zeros(s.hidden, s.heads * s.head_dim, **f),
                     bo=torch.zeros(s.hidden, **f) if o_bias else None,
                     wgu=torch.zeros(2 * s.inter, s.hidden, **f), bgu=torch.zeros(2 * s.inter, **f) if mlp_bias else None,
                     wd=torch.zeros(s.hidden, s.inter, **f), bd=torch.zeros(s.hidden, **f) if mlp_bias else None)
            if a.qk_norm:
                L.update(q_norm=torch.zeros(s.head_dim, **f), k_norm=torch.zeros(s.head_dim, **f))
            if a.gemma:  # norms on the attention and MLP outputs
                L.update(attn_out_norm=torch.zeros(s.hidden, **f), ff_out_norm=torch.zeros(s.hidden, **f))
            self.layers.append(L)
        self.ropes = ropes  # rotary module's layer_type -> HF's own cos/sin tables
        self.cos, self.sin = ropes[a.rope_keys[0]]
        self.fused_decode = True  # CPU fp32 decode through cpu_kernels when it builds
        self.views = self._hf_views(qkv_bias, mlp_bias, o_bias)
        # matmul_dtype (`set_matmul_dtype`): id(weight matrix) -> its copy in that dtype, for the matrices
        # still held in the model's dtype (a tied LM head, which is also the embedding). Empty: none.
        self.matmul_dtype: torch.dtype | None = None
        self._mm: dict[int, torch.Tensor] = {}

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_hf(cls, model: Any, dtype: torch.dtype | None = None, device: Any = None,
                max_len: int | None = None) -> "FastLM":
        """From a causal LM, or from the text model of a LLaVA-style VLM (its HF names keep their
        `model.language_model.` prefix, so weight sync takes the VLM's own state dict).
        `max_len` caps the positions the rope tables cover (default: the model's context)."""
        vlm = is_vlm(model)
        cfg = model.config.text_config if vlm else model.config
        decoder, prefix = (model.model.language_model, TEXT_PREFIX) if vlm else (model.model, "model.")
        s = _shape(cfg, max_len)
        arch = arch_of(cfg, s.head_dim)
        p0 = next(model.parameters())
        dtype = dtype or p0.dtype
        device = torch.device(device) if device is not None else p0.device
        names = dict(model.named_parameters())
        qkv_bias = prefix + "layers.0.self_attn.q_proj.bias" in names
        o_bias = prefix + "layers.0.self_attn.o_proj.bias" in names
        mlp_bias = prefix + "layers.0.mlp.gate_proj.bias" in names
        tied = bool(getattr(cfg, "tie_word_embeddings", False)) or "lm_head.weight" not in names
        ropes = {k: tuple(t.to(dtype) for t in _rope_table(decoder, s, device, p0.dtype, k))  # HF casts to x.dtype
                 for k in dict.fromkeys(arch.rope_keys)}
        lm = cls(s, dtype, device, ropes, qkv_bias, mlp_bias, o_bias, tied, prefix, arch)
        state = model.state_dict()
        with torch.no_grad():
            for name, view in lm.views.items():
                view.copy_(state[name])
        return lm

    def _hf_views(self, qkv_bias: bool, mlp_bias: bool, o_bias: bool) -> dict[str, torch.Tensor]:
        """HF parameter name -> the slice of our fused tensors that holds it."""
        s, gemma = self.shape, self.arch.gemma
        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        v = {self.prefix + "embed_tokens.weight": self.embed, self.prefix + "norm.weight": self.final_norm}
        if not self.tied:
            v["lm_head.weight"] = self.lm_head
        for i, L in enumerate(self.layers):
            p = f"{self.prefix}layers.{i}."
            v[p + "input_layernorm.weight"] = L["in_norm"]
            if gemma:  # Gemma: post_attention_layernorm normalises the attention output
                v[p + "post_attention_layernorm.weight"] = L["attn_out_norm"]
                v[p + "pre_feedforward_layernorm.weight"] = L["ff_norm"]
                v[p + "post_feedforward_layernorm.weight"] = L["ff_out_norm"]
            else:  # Llama family: post_attention_layernorm is the MLP's input norm
                v[p + "post_attention_layernorm.weight"] = L["ff_norm"]
            if self.arch.qk_norm:
                v[p + "self_attn.q_norm.weight"] = L["q_norm"]
                v[p + "self_attn.k_norm.weight"] = L["k_norm"]
            for nm, a, b in (("q", 0, q), ("k", q, q + kv), ("v", q + kv, q + 2 * kv)):
                v[p + f"self_attn.{nm}_proj.weight"] = L["wqkv"][a:b]
                if qkv_bias:
                    v[p + f"self_attn.{nm}_proj.bias"] = L["bqkv"][a:b]
            v[p + "self_attn.o_proj.weight"] = L["wo"]
            if o_bias:
                v[p + "self_attn.o_proj.bias"] = L["bo"]
            v[p + "mlp.gate_proj.weight"] = L["wgu"][: s.inter]
            v[p + "mlp.up_proj.weight"] = L["wgu"][s.inter:]
            v[p + "mlp.down_proj.weight"] = L["wd"]
            if mlp_bias:
                v[p + "mlp.gate_proj.bias"] = L["bgu"][: s.inter]
                v[p + "mlp.up_proj.bias"] = L["bgu"][s.inter:]
                v[p + "mlp.down_proj.bias"] = L["bd"]
        return v

    def set_matmul_dtype(self, dtype: torch.dtype | None) -> None:
        """Run the weight matmuls (q/k/v/o, gate/up/down, the LM head) in `dtype`, all else as is.

        On a CPU with AMX or AVX512-BF16, bfloat16 matmuls run ~4x the fp32 rate (64-row
        decode shapes on this project's machine). Activations, the KV cache, norms, rotary,
        attention, softmax and sampling stay in the model's dtype (what torch.autocast does
        on CPU), so the fused CPU kernels still run.

        The weight matrices are then held in `dtype` alone: the views weight sync writes point
        into them (it casts as it copies, exactly as `.to(dtype)` rounds), so no fp32 copy of
        them stays behind. In RL the trainer holds the fp32 masters; a third copy here was 425 MB
        on SmolLM2-135M (the engine's build: 2.26 -> 1.94 GiB RSS). The embedding stays in the
        model's dtype (its rows are activations); a tied LM head, which is the embedding, gets
        its `dtype` copy in `_mm`, re-derived after each sync (`refresh_matmul_weights`).
        """
        self.matmul_dtype = None if dtype in (None, self.dtype) else dtype
        if self.matmul_dtype is not None:
            with torch.no_grad():
                for L in self.layers:
                    for k in MATRICES:
                        L[k] = L[k].to(self.matmul_dtype)
                if not self.tied:
                    self.lm_head = self.lm_head.to(self.matmul_dtype)
            L0 = self.layers[0]  # the views again, now into the bf16 matrices
            self.views = self._hf_views(L0["bqkv"] is not None, L0["bgu"] is not None, L0["bo"] is not None)
        self.refresh_matmul_weights()

    def refresh_matmul_weights(self, changed: Sequence[torch.Tensor] | None = None) -> None:
        """The matmul_dtype copies of the matrices still held in the model's dtype (a tied LM head)
        from those matrices, after a weight sync wrote `changed` (views; None: any may have
        changed). A copy already there is written in place, and only where a changed view lies
        in its matrix (a LoRA sync leaves the tied head as it was)."""
        if self.matmul_dtype is None:
            self._mm = {}
            return
        mats = [w for w in [self.lm_head] + [L[k] for L in self.layers for k in MATRICES]
                if w.dtype != self.matmul_dtype]
        old = self._mm
        if old and all(id(w) in old and old[id(w)].shape == w.shape and old[id(w)].dtype == self.matmul_dtype
                       for w in mats):
            touched = None if changed is None else {v.untyped_storage().data_ptr() for v in changed}
            with torch.no_grad():
                for w in mats:
                    if touched is None or w.untyped_storage().data_ptr() in touched:
                        old[id(w)].copy_(w)
            return
        self._mm = {id(w): w.to(self.matmul_dtype) for w in mats}

    def _linear(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        """x @ w.T + b, in `matmul_dtype` when one is set (output back in x's dtype)."""
        low = self._mm.get(id(w), w) if self._mm else w  # the matrix, or its matmul_dtype copy
        if low.dtype == x.dtype:
            return torch.nn.functional.linear(x, low, b)
        out = torch.nn.functional.linear(x.to(low.dtype), low).to(x.dtype)
        return out if b is None else out + b

    def new_lanes(self, n: int, cap: int) -> Lanes:
        return Lanes(self.shape, n, cap, self.dtype, self.device)

    def embed_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Input embeddings [..., hidden] of token ids (Gemma: times sqrt(hidden), as HF)."""
        x = self.embed[tokens]
        return x if self.embed_scale is None else x * self.embed_scale

    # ---- forward ------------------------------------------------------------------------
    def forward(self, tokens: torch.Tensor, start: torch.Tensor, lanes: Lanes, row0: int = 0,
                width: int | None = None, shared: SharedPrefix | None = None, fused: bool = True,
                embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states [B, T, hidden] for `tokens` [B, T] at positions start[b] + t.

        Row b reads and writes lane row0 + b; its keys at positions <= start[b] + t are
        visible to query t (causal; in a sliding-window layer only the last `window` of them).
        Padding queries past a row's real tokens write KV past its length, which later writes
        overwrite and masks never expose. `width` fixes the number of key positions read
        (static shapes for CUDA graphs). `shared` names, per row, a lane holding the same keys
        for its first positions (a GRPO group's prompt), read from there by the fused CPU
        kernel (CPU fp32, T <= FUSED_MAX_T). `fused=False` keeps the matmul attention: prefill
        uses it whatever T, so a prompt's KV has the same bits whether its tail or all of it
        was computed. `embeds` [B, T, hidden] replaces the input embeddings (image prompts:
        image features at the placeholders; see `embed_tokens`).
        """
        s, a = self.shape, self.arch
        B, T = tokens.shape
        pos = start[:, None] + torch.arange(T, device=tokens.device)  # [B, T]
        rows = torch.arange(row0, row0 + B, device=tokens.device)[:, None].expand(B, T)  # [B, T]
        plan, rots, masks, Lm = None, {}, {}, 0
        if fused and T <= FUSED_MAX_T and width is None and self.fused_decode and self.device.type == "cpu" \
                and self.dtype == torch.float32 and s.head_dim <= 256 and cpu_kernels.available():
            plan = cpu_kernels.DecodePlan(rows[:, 0], start + 1, lanes.n, lanes.cap,
                                          *(shared if shared is not None else (None, None, None)))
        else:  # the kernel rotates with the tables and masks itself; the tensor path needs both per layer kind
            rpos = pos.clamp(max=self.cos.shape[0] - 1)  # padding queries may run past the table
            rots = {k: (c[rpos][:, :, None], sn[rpos][:, :, None]) for k, (c, sn) in self.ropes.items()}  # [B, T, 1, D]
            if width is None:
                need = int(start.max()) + T
                # a slice narrower than the lane makes matmul copy K/V first (measured 2.3x slower
                # at 512 lanes); reading the whole lane is cheaper unless it is mostly empty
                width = lanes.cap if row0 == 0 and lanes.cap <= 2 * need else need
            Lm = width  # key positions read
            keys = torch.arange(Lm, device=tokens.device)
            for w in dict.fromkeys(a.windows):
                visible = keys <= pos[..., None]  # [B, T, Lm]
                if w is not None:
                    visible = visible & (keys > pos[..., None] - w)
                masks[w] = visible[:, None] if T == 1 else \
                    visible[:, None, None].expand(B, 1, s.group, T, Lm).reshape(B, 1, s.group * T, Lm)
        x = self.embed_tokens(tokens) if embeds is None else embeds  # [B, T, H]
        for li, L in enumerate(self.layers):
            h = self._norm(x, L["in_norm"])
            cos, sin = rots.get(a.rope_keys[li], (None, None))
            h = self._attention(h, li, L, lanes.k[li], lanes.v[li], rows, pos, cos, sin, masks.get(a.windows[li]),
                                row0, Lm, plan)
            if a.gemma:
                h = self._norm(h, L["attn_out_norm"])
            x = x + h
            h = self._mlp(self._norm(x, L["ff_norm"]), L, plan is not None)
            if a.gemma:
                h = self._norm(h, L["ff_out_norm"])
            x = x + h
        return self._norm(x, self.final_norm)

    def _mlp(self, h: torch.Tensor, L: dict, fused: bool) -> torch.Tensor:
        s = self.shape
        gu = self._linear(h, L["wgu"], L["bgu"])  # [B, T, 2I]
        g, u = gu.split(s.inter, dim=-1)
        if self.arch.gemma:
            act = torch.nn.functional.gelu(g, approximate="tanh") * u  # HF gelu_pytorch_tanh
        elif fused:  # the fused path: one pass over gate|up
            act = cpu_kernels.silu_mul(gu)  # [B, T, I]
        else:
            act = torch.nn.functional.silu(g) * u
        return self._linear(act, L["wd"], L["bd"])

    def _attention(self, h: torch.Tensor, li: int, L: dict, kc: torch.Tensor, vc: torch.Tensor, rows: torch.Tensor,
                   pos: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, mask: torch.Tensor | None,
                   row0: int, Lm: int, plan: "cpu_kernels.DecodePlan | None" = None) -> torch.Tensor:
        """Layer li's attention output [B, T, hidden]: through `plan` (the C kernel, which
        rotates with the model's tables) or the tensor path (cos, sin, mask given)."""
        s, a = self.shape, self.arch
        B, T, _ = h.shape
        D, kvh, g = s.head_dim, s.kv_heads, s.group
        qkv = self._linear(h, L["wqkv"], L["bqkv"])  # [B, T, (H + 2kvh) D]
        if a.qk_norm:  # per-head norm of q and k, before the rotary embedding (HF order)
            nq, nk = s.heads * D, kvh * D
            qkv = torch.cat((self._norm(qkv[..., :nq].reshape(B, T, s.heads, D), L["q_norm"]).reshape(B, T, nq),
                             self._norm(qkv[..., nq:nq + nk].reshape(B, T, kvh, D), L["k_norm"]).reshape(B, T, nk),
                             qkv[..., nq + nk:]), dim=-1)
        if plan is not None:  # fused: rotary, KV write and attention over each row's visible positions
            c, sn = self.ropes[a.rope_keys[li]]
            o = plan.run(qkv, c, sn, kc, vc, s.heads, scale=a.attn_scale, window=a.windows[li] or 0)  # [B, T, H D]
            return self._linear(o, L["wo"], L["bo"])
        q, k, v = qkv.split((s.heads * D, kvh * D, kvh * D), dim=-1)
        q = _rotate(q.view(B, T, s.heads, D), cos, sin)  # [B, T, H, D]
        k = _rotate(k.view(B, T, kvh, D), cos, sin)  # [B, T, kvh, D]
        kc[rows, :, pos] = k  # lane write: [B, T] index pairs <- [B, T, kvh, D]
        vc[rows, :, pos] = v.reshape(B, T, kvh, D)
        K, V = kc[row0:row0 + B, :, :Lm], vc[row0:row0 + B, :, :Lm]  # [B, kvh, Lm, D] views
        q = q.view(B, T, kvh, g, D).permute(0, 2, 3, 1, 4).reshape(B, kvh, g * T, D)  # rows (g, t)
        att = torch.matmul(q, K.transpose(-1, -2)) * a.attn_scale  # [B, kvh, gT, Lm]
        att = att.masked_fill(~mask, float("-inf")).softmax(-1, dtype=torch.float32).to(q.dtype)  # as HF: fp32 softmax
        o = torch.matmul(att, V)  # [B, kvh, gT, D]
        o = o.view(B, kvh, g, T, D).permute(0, 3, 1, 2, 4).reshape(B, T, s.heads * D)
        return self._linear(o, L["wo"], L["bo"])

    def _norm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return _gemma_rms(x, w, self.shape.eps) if self.arch.gemma else _rms(x, w, self.shape.eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., hidden] -> fp32 logits [..., V] (Gemma: softcapped as HF, when configured)."""
        out = self._linear(hidden, self.lm_head)
        cap = self.arch.final_softcap
        if cap is not None:
            out = torch.tanh(out / cap) * cap
        return out.float()


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """HF LlamaRMSNorm: normalise in fp32, cast back, then scale."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * xf.to(x.dtype)


def _gemma_rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """HF Gemma3RMSNorm: normalise and scale by (1 + w) in fp32, then cast back."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * (1.0 + w.float())).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF apply_rotary_pos_emb on [B, T, heads, D] with cos/sin [B, T, 1, D]."""
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


def _rope_table(decoder: Any, s: Shape, device: torch.device, dtype: torch.dtype,
                layer_type: str | None = None) -> Rope:
    """cos, sin [max_pos, D] from the decoder's own rotary module (honours rope_theta/scaling;
    Gemma 3 keeps one table per layer type)."""
    rot = decoder.rotary_emb
    x = torch.zeros(1, 1, s.head_dim, dtype=dtype, device=device)
    ids = torch.arange(s.max_pos, device=device)[None]
    with torch.no_grad():
        cos, sin = rot(x, ids) if layer_type is None else rot(x, ids, layer_type)
    return cos[0].to(device).contiguous(), sin[0].to(device).contiguous()
