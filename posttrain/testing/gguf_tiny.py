"""Write a tiny random Llama as a GGUF file, the way llama.cpp lays one out.

For tests and offline smoke checks of the GGUF path (`posttrain models convert-gguf`): the
file has a byte-level BPE tokenizer (256 byte symbols, a few merges, ChatML control tokens),
an optional chat template, and the Llama q/k rows permuted as llama.cpp's
convert_hf_to_gguf.py does (transformers un-permutes them on load). `quantise=True` stores
the 2-D weights as Q8_0; the returned HF model then holds the dequantised values, so its
logits are what a correct conversion must reproduce.

    model = write_tiny_gguf(tmp / "tiny.gguf")      # -> the LlamaForCausalLM it encodes

Limits: Llama only (any `architecture` string can be written, to test the refusal of an
unsupported one, but the tensors stay Llama's); hidden sizes must be multiples of 32 for Q8_0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2 (unk/bos, bos, eos)
MERGES = ["h e", "l l", "Ġ t", "Ġt he"]


def _vocab() -> list[str]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    byte_symbols = list(bytes_to_unicode().values())
    merged = ["".join(m.split(" ")) for m in MERGES]
    return SPECIAL + byte_symbols + merged


def _permute(w: Any, n_head: int) -> Any:
    # llama.cpp convert_hf_to_gguf.py LlamaModel.permute: rotary halves -> interleaved pairs.
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(path: str | Path, *, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 4,
                    kv_heads: int = 2, ffn: int = 128, context: int = 128, quantise: bool = False,
                    chat_template: Optional[str] = CHATML_TEMPLATE, architecture: str = "llama",
                    tokenizer: bool = True) -> Any:
    """Write the GGUF; return the fp32 `LlamaForCausalLM` whose weights it stores."""
    import gguf
    import numpy as np
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens = _vocab()
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=context,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1 so that a dropped norm weight changes the logits
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)

    w = gguf.GGUFWriter(str(path), architecture)
    w.add_name("tiny-llama-test")
    w.add_context_length(context)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hidden // heads)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantise else gguf.LlamaFileType.ALL_F32)
    if tokenizer:  # False: a file without a vocabulary, which conversion must refuse
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types([gguf.TokenType.CONTROL] * len(SPECIAL) + [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIAL)))
        w.add_token_merges(MERGES)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_pad_token_id(2)
        w.add_add_bos_token(False)
    if tokenizer and chat_template is not None:
        w.add_chat_template(chat_template)

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    per_layer = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for i in range(layers):
        for hf, gg in per_layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{gg}.weight"
    state = model.state_dict()
    for hf_name, gguf_name in names.items():
        arr = state[hf_name].numpy().astype(np.float32)
        if gguf_name.endswith("attn_q.weight"):
            arr = _permute(arr, heads)
        elif gguf_name.endswith("attn_k.weight"):
            arr = _permute(arr, kv_heads)
        if quantise and arr.ndim == 2:
            q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(gguf_name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            back = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0).reshape(arr.shape)
            if gguf_name.endswith("attn_q.weight"):
                back = _unpermute(back, heads)
            elif gguf_name.endswith("attn_k.weight"):
                back = _unpermute(back, kv_heads)
            with torch.no_grad():
                state[hf_name].copy_(torch.from_numpy(np.ascontiguousarray(back)))
        else:
            w.add_tensor(gguf_name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def _unpermute(w: Any, n_head: int) -> Any:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(2, 1).reshape(w.shape)
