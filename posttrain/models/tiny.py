"""The built-in default policy: a tiny Llama with a character-level tokenizer.

Both are real Hugging Face objects (`LlamaForCausalLM`, `PreTrainedTokenizerFast` built
with `tokenizers`) and go through `save_pretrained` / `from_pretrained`, the same code
path that loads a 0.5B Qwen checkpoint on a GPU machine. The chat template wraps every
message as `<|role|>content<|end|>`; `<|end|>` is the EOS token, so generation of an
assistant turn stops at the end of the turn.

Limits: the vocabulary is printable ASCII plus newline and tab; any other character
encodes as `<unk>`. The context is `max_position_embeddings` tokens (256 by default).
"""

from __future__ import annotations

import string
from typing import Any

from posttrain.config import TinyModelConfig

SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>",
                  "<tool_call>", "</tool_call>", "<image>"]
CHARS = [c for c in string.printable if c not in "\r\x0b\x0c"]  # 97 printable chars incl. space \n \t

CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "<|{{ m['role'] }}|>{{ m['content'] }}<|end|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tokenizer() -> Any:
    """A character-level `PreTrainedTokenizerFast`: one token per character."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")  # split every char
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="<|end|>",
        additional_special_tokens=SPECIAL_TOKENS[4:],
        padding_side="left",
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_tiny(cfg: TinyModelConfig | None = None, seed: int = 0) -> tuple[Any, Any]:
    """A freshly initialised tiny `LlamaForCausalLM` and its tokenizer (fp32)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = cfg or TinyModelConfig()
    tok = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model, tok
