"""train/lora.py: LoRA adapters are a function of the run's seed, not of whatever drew from torch's RNG before."""

import torch

from posttrain.config import LoraConfig, TrainerConfig
from posttrain.train.lora import apply_lora
from tests.unit.train.test_prefix_kv import llama

TCFG = TrainerConfig(lora=LoraConfig(target_modules=["q_proj", "v_proj"]))


def adapters(seed: int, draws_before: int) -> dict[str, torch.Tensor]:
    base = llama()  # seeds torch itself: the draws come after it
    torch.manual_seed(1234)
    torch.rand(draws_before)  # the process's RNG wherever the caller left it
    model = apply_lora(base, TCFG, seed)
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_the_same_seed_gives_the_same_adapters_whatever_drew_before():
    a, b = adapters(7, 0), adapters(7, 1000)
    assert a.keys() == b.keys() and a and all(torch.equal(a[n], b[n]) for n in a)


def test_another_seed_gives_other_adapters():
    a, b = adapters(7, 0), adapters(8, 0)
    assert any(not torch.equal(a[n], b[n]) for n in a if "lora_A" in n)


def test_the_callers_rng_stream_is_left_as_it_was():
    base = llama()
    torch.manual_seed(5)
    expected = torch.rand(4)
    torch.manual_seed(5)
    apply_lora(base, TCFG, 7)
    assert torch.equal(torch.rand(4), expected)
