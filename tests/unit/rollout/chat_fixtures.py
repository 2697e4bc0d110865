"""Real-tokenizer fixtures: a small byte-level BPE with a ChatML template, the real SmolLM2 when
converted, and a "successor" model whose greedy output is a chosen token chain.

    tok = bpe_chat_tokenizer()                 # EOS <|endoftext|>, end of turn <|im_end|> (a Qwen base layout)
    model = successor_model(tok, chain)        # greedy: after chain[i] comes chain[i + 1]

The successor model is a one-layer Llama whose attention and MLP write nothing, so the
last hidden state is the current token's (unit) embedding; the head row of `succ[t]` is
that embedding, so greedy decoding follows a permutation of the vocabulary. Both engines
run it, which makes "stops exactly here" checkable without a trained model.
"""

from __future__ import annotations

import os
from pathlib import Path

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
_CORPUS = ["Hello world, the answer is 42.", "def add(a, b):\n    return a + b\n", "<tool_call>{\"name\": \"f\"}</tool_call>",
           "Let x = 3; then 2x + 1 = 7. The result is \\boxed{7}.", "Write a poem about autumn in three lines.",
           "unicode: café naïve — ok", "STOP here. Final answer: yes"] * 20


def bpe_chat_tokenizer(eos: str = "<|endoftext|>"):
    """A byte-level BPE (about 400 ids) trained here, with ChatML special tokens and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core.train_from_iterator(_CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token=eos, pad_token="<|endoftext|>",
                                  bos_token="<|im_start|>")
    tok.chat_template = CHATML
    return tok


def real_smollm2_dir() -> Path | None:
    """A converted SmolLM2 directory: POSTTRAIN_REAL_MODELS entries, then POSTTRAIN_SMOLLM2 or
    <repo>/models/smollm2 (`posttrain models get smollm2-135m-instruct --out models/smollm2`)."""
    cands = [p for p in os.environ.get("POSTTRAIN_REAL_MODELS", "").split(":") if p]
    cands.append(os.environ.get("POSTTRAIN_SMOLLM2", str(Path(__file__).resolve().parents[3] / "models" / "smollm2")))
    for c in cands:
        manifest = Path(c) / "posttrain-model.json"
        if manifest.is_file() and "smollm2" in manifest.read_text().lower() and (Path(c) / "tokenizer.json").is_file():
            return Path(c)
    return None


def successor_model(tok, chain: list[int], seed: int = 0):
    """An untied one-layer Llama whose greedy continuation of token chain[i] is chain[i + 1]."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    assert len(set(chain)) == len(chain), "a chain token may appear once (the map is a permutation)"
    V, H = len(tok), 64
    cfg = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                      num_key_value_heads=4, max_position_embeddings=512, tie_word_embeddings=False,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id)
    model = LlamaForCausalLM(cfg).eval()
    model.generation_config.eos_token_id = tok.eos_token_id
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(V, H, generator=g)
    emb /= emb.norm(dim=-1, keepdim=True)
    succ = {a: b for a, b in zip(chain, chain[1:])}
    free_src = [t for t in range(V) if t not in succ]
    free_dst = [t for t in range(V) if t not in set(succ.values())]
    perm = torch.randperm(len(free_dst), generator=g).tolist()
    succ.update({s: free_dst[j] for s, j in zip(free_src, perm)})
    head = torch.zeros(V, H)
    for t, nxt in succ.items():
        head[nxt] = emb[t] * 10.0
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(emb)
        model.lm_head.weight.copy_(head)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return model
