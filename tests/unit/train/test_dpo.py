"""DPO: sigmoid and IPO against hand values and TRL, pair loading errors, pairs from runs, recipe."""

import copy
import json
import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from posttrain.config import load_config
from posttrain.errors import ConfigError, TaskFileError
from posttrain.models.tiny import build_tiny
from posttrain.registry import registry
from posttrain.train.chat_data import ChatTemplateMismatch
from posttrain.train.dpo import load_pairs_jsonl, pairs_from_run
from posttrain.types import Trajectory, Turn, VerifyResult

import posttrain.train.losses  # noqa: F401  (registers dpo_loss)

TINY = ["model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2",
        "model.tiny.num_key_value_heads=2", "threads=1"]


def _fn(name):
    return registry("dpo_loss").get(name)


def _t(*v):
    return torch.tensor(v, dtype=torch.float32)


def test_sigmoid_hand_value():
    # margin ((-1) - (-1.5)) - ((-2) - (-1.5)) = 1 -> -log sigmoid(0.1) = log(1 + e^-0.1)
    loss = _fn("sigmoid")(_t(-1.0), _t(-2.0), _t(-1.5), _t(-1.5), _t(3), _t(3), beta=0.1)
    assert float(loss) == pytest.approx(math.log1p(math.exp(-0.1)), abs=1e-6)


def test_ipo_hand_value_is_length_normalised():
    # h = (-2 + 3) / 2 - (-4 + 3) / 4 = .75; beta .5 -> (.75 - 1)^2
    loss = _fn("ipo")(_t(-2.0), _t(-4.0), _t(-3.0), _t(-3.0), _t(2), _t(4), beta=0.5)
    assert float(loss) == pytest.approx(0.0625, abs=1e-6)


def _trl_dpo(loss_type, pc, pr, rc, rr, nc, nr, beta):
    trl = pytest.importorskip("trl")  # noqa: F841
    from trl.trainer.dpo_trainer import DPOTrainer

    N, T = len(pc), int(max(nc.max(), nr.max())) + 2
    mask = torch.zeros(2 * N, T)
    logps = torch.zeros(2 * N, T - 1)
    for i, (n, total) in enumerate(zip(torch.cat([nc, nr]).tolist(), torch.cat([pc, pr]).tolist())):
        mask[i, 1:1 + int(n)] = 1  # completion tokens; the shifted mask scores them
        logps[i, :int(n)] = total / n
    out = SimpleNamespace(log_probs=logps, entropy=torch.zeros_like(logps), mean_logits=torch.zeros_like(logps),
                          is_top1=torch.zeros_like(logps, dtype=torch.bool))
    acc = SimpleNamespace(device="cpu", gather_for_metrics=lambda x: x, gather=lambda x: x)
    fake = SimpleNamespace(model=SimpleNamespace(training=True), accelerator=acc, aux_loss_enabled=False, ld_alpha=None,
                           precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=[loss_type],
                           loss_weights=[1.0], beta=beta, use_weighting=False, _metrics={"train": defaultdict(list)},
                           _total_train_tokens=0, _tp_size=1)
    inputs = {"input_ids": torch.zeros(2 * N, T, dtype=torch.long), "attention_mask": torch.ones(2 * N, T),
              "completion_mask": mask, "ref_chosen_logps": rc, "ref_rejected_logps": rr}
    return float(DPOTrainer._compute_loss(fake, lambda **kw: out, inputs, False))


@pytest.mark.parametrize("name", ["sigmoid", "ipo"])
def test_dpo_losses_equal_trl(name):
    g = torch.Generator().manual_seed(0)
    pc, pr, rc, rr = (-torch.rand(5, generator=g) * 8 for _ in range(4))
    nc, nr = _t(3, 5, 2, 7, 4), _t(6, 1, 2, 3, 5)
    ours = _fn(name)(pc, pr, rc, rr, nc, nr, beta=0.3).mean()
    assert float(ours) == pytest.approx(_trl_dpo(name, pc, pr, rc, rr, nc, nr, 0.3), abs=1e-5)


@pytest.fixture(scope="module")
def tok():
    return build_tiny(load_config(None, TINY).model.tiny)[1]


def _write(tmp_path, rows):
    p = tmp_path / "pairs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_pairs_from_file_are_prompt_plus_eos_terminated_completions(tmp_path, tok):
    p = _write(tmp_path, [{"prompt": "1+1=", "chosen": "2", "rejected": "3"},
                          {"prompt": [{"role": "user", "content": "2+2="}],
                           "chosen": [{"role": "assistant", "content": "4"}], "rejected": "5"}])
    a, b = load_pairs_jsonl(p, tok)
    assert tok.decode(a.prompt, skip_special_tokens=False) == "<|user|>1+1=<|end|><|assistant|>"
    assert a.chosen == (tok.convert_tokens_to_ids("2"), tok.eos_token_id)
    assert b.rejected == (tok.convert_tokens_to_ids("5"), tok.eos_token_id)


@pytest.mark.parametrize("row,match", [
    ({"prompt": "a", "chosen": "b"}, "missing field 'rejected'"),
    ({"chosen": "b", "rejected": "c"}, "missing field 'prompt'"),
    ({"prompt": "a", "chosen": 3, "rejected": "c"}, "field 'chosen'"),
])
def test_bad_pair_rows_name_line_and_field(tmp_path, tok, row, match):
    p = _write(tmp_path, [{"prompt": "a", "chosen": "b", "rejected": "c"}, row])
    with pytest.raises(TaskFileError, match=match) as e:
        load_pairs_jsonl(p, tok)
    assert f"{p}:2" in str(e.value)


def test_chat_template_mismatch_in_pairs_is_named(tmp_path, tok):
    bad = copy.deepcopy(tok)
    bad.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}{{ messages|length }}"
    p = _write(tmp_path, [{"prompt": "a", "chosen": "b", "rejected": "c"}])
    with pytest.raises(ChatTemplateMismatch, match="chat-template mismatch"):
        load_pairs_jsonl(p, bad)


def _traj(task, sample, reward, ids, status="ok"):
    v = VerifyResult(reward, reward == 1.0) if status == "ok" else VerifyResult.infra("down")
    return Trajectory(task, "v", "arithmetic", (1, 2), (Turn("assistant", "x", tuple(ids), (0.0,) * len(ids)),),
                      reward=reward, verify=v, step=0, group=0 if task == "a" else 1, sample=sample)


def test_pairs_from_run_take_best_against_worst_per_task(tmp_path):
    from posttrain.store.trajectories import TrajectoryStore

    s = TrajectoryStore(tmp_path / "trajectories.sqlite")
    s.put_many([_traj("a", 0, 0.0, [5]), _traj("a", 1, 1.0, [6]), _traj("a", 2, 0.5, [7]),
                _traj("a", 3, 1.0, [9], status="infra"),
                _traj("b", 0, 0.3, [8]), _traj("b", 1, 0.4, [9])])  # b: gap .1 < .5 -> no pair
    s.close()
    pairs = pairs_from_run(tmp_path, min_gap=0.5)
    assert [(p.chosen, p.rejected) for p in pairs] == [((6,), (5,))]
    with pytest.raises(TaskFileError, match="min_reward_gap"):
        pairs_from_run(tmp_path, min_gap=2.0)


def test_dpo_config_needs_exactly_one_source(tmp_path):
    from posttrain.recipes.pipeline import run_recipe

    with pytest.raises(ConfigError, match="exactly one of dpo.data"):
        run_recipe("dpo", load_config(None, TINY), tmp_path)


def test_lora_target_that_does_not_exist_is_named(tmp_path):
    pytest.importorskip("peft")
    from posttrain.recipes.pipeline import run_recipe

    p = _write(tmp_path, [{"prompt": "a", "chosen": "b", "rejected": "c"}] * 2)
    cfg = load_config(None, TINY + [f"dpo.data={p}", "dpo.steps=1", "trainer.lora={target_modules: [qkv_proj]}"])
    with pytest.raises(ConfigError, match="no module named 'qkv_proj'.*q_proj"):
        run_recipe("dpo", cfg, tmp_path / "run")


@pytest.mark.slow
@pytest.mark.parametrize("loss,lora", [("sigmoid", False), ("ipo", True)])
def test_dpo_recipe_learns_held_out_preferences_with_reference_computed_once(tmp_path, monkeypatch, loss, lora):
    if lora:
        pytest.importorskip("peft")
    import posttrain.train.dpo as dpo
    from posttrain.recipes.pipeline import run_recipe

    calls = []
    real = dpo.reference_logprobs
    monkeypatch.setattr(dpo, "reference_logprobs", lambda m, p, *a, **k: calls.append(len(p)) or real(m, p, *a, **k))
    rows = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": chr(97 + a) + chr(97 + b)} for a in range(8) for b in range(5)]
    p = _write(tmp_path, rows)
    over = TINY + [f"dpo.data={p}", f"dpo.loss={loss}", "dpo.steps=25", "dpo.batch_size=16", "dpo.lr=3e-3",
                   "dpo.eval_every=25", "dpo.eval_frac=0.25", "dpo.beta=0.5"]
    if lora:
        over += ["trainer.lora={r: 4, target_modules: [q_proj, v_proj, o_proj, up_proj, down_proj]}", "dpo.lr=1e-2"]
    s = run_recipe("dpo", load_config(None, over), tmp_path / "run")
    assert calls == [30, 10]  # train and held-out pairs, each once, before training
    assert s["eval_after"]["eval/loss"] < s["eval_before"]["eval/loss"]
    assert s["eval_after"]["eval/accuracy"] >= 0.8
