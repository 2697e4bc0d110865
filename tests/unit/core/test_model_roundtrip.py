"""The tiny default model and tokenizer survive save_pretrained / from_pretrained."""

import torch

from posttrain.models import load_policy, save_policy
from posttrain.models.tiny import build_tiny, build_tokenizer


def test_tokenizer_is_character_level_and_round_trips_text():
    tok = build_tokenizer()
    text = "f(0)=12,f(1)=19 x*7+12\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tok.decode(ids) == text


def test_chat_template_ends_with_the_generation_prompt():
    tok = build_tokenizer()
    s = tok.apply_chat_template([{"role": "user", "content": "1+2="}], add_generation_prompt=True, tokenize=False)
    assert s == "<|user|>1+2=<|end|><|assistant|>"
    assert tok.eos_token == "<|end|>"


def test_model_and_tokenizer_save_load_round_trip(tmp_path):
    model, tok = build_tiny(seed=3)
    save_policy(model, tok, tmp_path / "m")
    model2, tok2 = load_policy(tmp_path / "m")
    assert type(model2).__name__ == "LlamaForCausalLM"
    ids = torch.tensor([tok("12+34=", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, model2(ids).logits)
    assert tok2("a b\n", add_special_tokens=False)["input_ids"] == tok("a b\n", add_special_tokens=False)["input_ids"]
    assert tok2.chat_template == tok.chat_template
    assert tok2.eos_token_id == tok.eos_token_id
