"""Our losses, KL, entropy and logprobs equal TRL's on the same inputs (skipped without TRL).

TRL computes the GRPO-family losses inside `GRPOTrainer._compute_loss`, a method. We
call that method on a stand-in `self` that holds only the attributes it reads, with the
model forward replaced by fixed per-token logprobs, so TRL's own loss code runs on
exactly our tensors. Mapping of settings (ours -> TRL):
    grpo -> loss_type="grpo";  dapo -> "dapo" (token mean over the generation batch);
    dr_grpo -> "dr_grpo" (max_completion_length = max_tokens);
    gspo -> "grpo" with importance_sampling_level="sequence";
    cispo -> "cispo" with TRL epsilon_high = 1 + our clip_eps_high (TRL's is the bound itself);
    k3 -> TRL's KL term (beta > 0).
"""

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

trl = pytest.importorskip("trl")
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402
from trl.trainer.utils import entropy_from_logits as trl_entropy  # noqa: E402
from trl.trainer.utils import selective_log_softmax  # noqa: E402

from posttrain.registry import registry  # noqa: E402
from posttrain.train.losses import entropy_from_logits  # noqa: E402

B, T = 6, 5


class _Acc:
    num_processes = 1

    def gather(self, x):
        return x

    def gather_for_metrics(self, x):
        return x

    def reduce(self, x, reduction="sum"):
        return x


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g) * 2  # [B, T]
    old = logp + (torch.rand(B, T, generator=g) - 0.5) * 0.8  # ratios in ~[0.67, 1.5]
    ref = logp + (torch.rand(B, T, generator=g) - 0.5)
    mask = torch.ones(B, T)
    mask[1, 3:] = 0  # ragged lengths
    mask[4, 1:] = 0
    adv = torch.randn(B, generator=g)
    return logp, old, ref, mask, adv


def _trl_loss(loss_type, logp, old, ref, mask, adv, eps_low=0.2, eps_high=0.2, beta=0.0, level="token",
              max_len=T):
    fake = SimpleNamespace(
        loss_type=loss_type, importance_sampling_level=level, epsilon_low=eps_low, epsilon_high=eps_high,
        beta=beta, top_entropy_quantile=1.0, off_policy_mask_threshold=None, use_vllm=False,
        vllm_importance_sampling_correction=False, aux_loss_enabled=False, _entropy_bonus_enabled=False,
        max_completion_length=max_len, current_gradient_accumulation_steps=1, accelerator=_Acc(),
        model=SimpleNamespace(training=True), _metrics={"train": defaultdict(list)},
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
    )
    fake._get_per_token_logps_and_entropies = lambda *a, **k: (logp, torch.zeros_like(logp), None)
    inputs = {"prompt_ids": torch.zeros(B, 1, dtype=torch.long), "prompt_mask": torch.ones(B, 1),
              "completion_ids": torch.zeros(B, T, dtype=torch.long), "completion_mask": mask,
              "advantages": adv, "old_per_token_logps": old, "ref_per_token_logps": ref,
              "num_items_in_batch": mask.sum()}
    loss = GRPOTrainer._compute_loss(fake, None, inputs)
    return float(loss), fake._metrics["train"]


@pytest.mark.parametrize("ours,theirs,kw", [
    ("grpo", "grpo", {}),
    ("dapo", "dapo", {"eps_high": 0.28}),
    ("dr_grpo", "dr_grpo", {}),
])
def test_token_level_losses_equal_trl(ours, theirs, kw):
    logp, old, ref, mask, adv = _inputs()
    eps_high = kw.get("eps_high", 0.2)
    mine, st = registry("loss").get(ours)(logp, old, adv, mask, clip_eps=0.2, clip_eps_high=eps_high, max_tokens=T)
    want, metrics = _trl_loss(theirs, logp, old, ref, mask, adv, eps_high=eps_high)
    assert float(mine) == pytest.approx(want, abs=1e-6)
    assert st["clip_frac"] == pytest.approx(metrics["clip_ratio/region_mean"][0], abs=1e-6)


def test_gspo_equals_trl_sequence_level_importance_sampling():
    logp, old, ref, mask, adv = _inputs(1)
    mine, st = registry("loss").get("gspo")(logp, old, adv, mask, clip_eps=3e-4, clip_eps_high=4e-4)
    want, metrics = _trl_loss("grpo", logp, old, ref, mask, adv, eps_low=3e-4, eps_high=4e-4, level="sequence")
    assert float(mine) == pytest.approx(want, abs=1e-6)
    assert st["clip_frac"] == pytest.approx(metrics["clip_ratio/region_mean"][0], abs=1e-6)


def test_cispo_equals_trl():
    logp, old, ref, mask, adv = _inputs(2)
    mine, _ = registry("loss").get("cispo")(logp, old, adv, mask, clip_eps_high=0.28)
    want, _ = _trl_loss("cispo", logp, old, ref, mask, adv, eps_high=1.28)
    assert float(mine) == pytest.approx(want, abs=1e-6)


def test_k3_kl_term_equals_trl():
    # TRL adds beta * k3 per token before the grpo sequence mean; isolate it with two calls
    logp, old, ref, mask, adv = _inputs(3)
    with_kl, metrics = _trl_loss("grpo", logp, old, ref, mask, adv, beta=0.5)
    without, _ = _trl_loss("grpo", logp, old, ref, mask, adv, beta=0.0)
    k3 = registry("kl").get("k3")(logp, ref)  # [B, T]
    seq_mean = ((k3 * mask).sum(-1) / mask.sum(-1)).mean()
    assert (with_kl - without) / 0.5 == pytest.approx(float(seq_mean), abs=1e-5)
    assert metrics["kl"][0] == pytest.approx(float((k3 * mask).sum() / mask.sum()), abs=1e-6)


def test_entropy_equals_trl():
    logits = torch.randn(3, 7, 24, generator=torch.Generator().manual_seed(4))
    assert torch.allclose(entropy_from_logits(logits), trl_entropy(logits), atol=1e-5)


def test_token_logprobs_equal_trl_selective_log_softmax():
    from posttrain.models.tiny import build_tiny
    from posttrain.train.batching import token_logprobs

    model, _ = build_tiny(seed=0)
    ids = torch.randint(11, 60, (2, 9), generator=torch.Generator().manual_seed(5))
    mine, _ = token_logprobs(model, ids, torch.ones_like(ids))
    with torch.no_grad():
        logits = model(input_ids=ids).logits[:, :-1]
    assert torch.allclose(mine.detach(), selective_log_softmax(logits, ids[:, 1:]), atol=1e-5)
