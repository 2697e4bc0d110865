"""train/checkpoint.py's RNG states carry the CUDA generator's where CUDA is in use.

CPU-only: torch.cuda's four calls are stood in for, so the test says what is saved and put back,
not that a GPU's generator works (tests/unit/train/sharded/test_sharded_rng.py has the rest).
"""

import torch


def test_the_cuda_generator_state_is_saved_and_restored_once_cuda_is_in_use(monkeypatch):
    from posttrain.train.checkpoint import rng_state, set_rng_state

    gen = {"state": torch.tensor([1, 2, 3], dtype=torch.uint8)}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": gen["state"].clone())
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device="cuda": gen.update(state=s.clone()))
    saved = rng_state()
    gen["state"] = torch.tensor([9, 9, 9], dtype=torch.uint8)  # the generator moves on
    set_rng_state(saved)
    assert torch.equal(gen["state"], torch.tensor([1, 2, 3], dtype=torch.uint8))
