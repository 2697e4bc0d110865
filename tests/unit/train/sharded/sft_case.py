"""The 2-rank `posttrain sft` case the CLI tests share (local processes, Ray actors):
a tiny model, 3 steps on a small arithmetic file, and the check that the sharded run wrote
the one-process recipe's model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

OVERRIDES = ["sft.steps=3", "sft.batch_size=8", "sft.max_len=32", "sft.lr=1e-2", "threads=1",
             "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2",
             "model.tiny.num_key_value_heads=2", "trainer.mixed_precision=fp32", "trainer.timeout_s=60"]


def sft_case(tmp_path: Path) -> tuple[Path, list[str]]:
    """(config file, overrides) of the one-process-equivalent run."""
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "completion": str(a + b)}) + "\n"
                            for a in range(6) for b in range(6)))
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text("name: sharded\n")
    return cfg_file, [f"sft.data={data}", *OVERRIDES]


def assert_writes_the_one_process_model(stdout: str, cfg_file: Path, over: list[str], two_dir: Path,
                                        one_dir: Path) -> None:
    """Same final loss (1e-5) and weights (1e-4 each) as run_sft in one process; accounting logged."""
    from posttrain.config import load_config
    from posttrain.models import load_policy
    from posttrain.recipes.pipeline import run_recipe

    two = json.loads(stdout[stdout.index("{"):])
    one = run_recipe("sft", load_config(cfg_file, over), one_dir)
    assert two["final_loss"] == pytest.approx(one["final_loss"], abs=1e-5)
    rows = [json.loads(x) for x in (two_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and rows[-1]["shard/sent_bytes"] > 0  # the collectives crossed ranks, and were counted
    a, b = load_policy(two["model"])[0].state_dict(), load_policy(one["model"])[0].state_dict()
    for k, v in b.items():
        assert (a[k] - v).abs().max() <= 1e-4, k
