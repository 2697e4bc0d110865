"""`posttrain sft CONFIG trainer.world_size=2` re-runs itself as 2 ranks (FSDP2 on gloo) and
writes the same model as the one-process recipe (within 1e-4 per weight after 3 steps)."""

import json
import subprocess
import sys

import pytest
import torch


@pytest.mark.slow
def test_sft_cli_on_two_ranks_writes_the_one_process_model(tmp_path):
    from posttrain.config import load_config
    from posttrain.models import load_policy
    from posttrain.train.sft import run_sft

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "completion": str(a + b)}) + "\n"
                            for a in range(6) for b in range(6)))
    over = [f"sft.data={data}", "sft.steps=3", "sft.batch_size=8", "sft.max_len=32", "sft.lr=1e-2", "threads=1",
            "model.tiny.hidden_size=32", "model.tiny.intermediate_size=64", "model.tiny.num_attention_heads=2",
            "model.tiny.num_key_value_heads=2", "trainer.mixed_precision=fp32", "trainer.timeout_s=60"]
    cfg_file = tmp_path / "run.yaml"
    cfg_file.write_text("name: sharded\n")
    proc = subprocess.run([sys.executable, "-m", "posttrain", "sft", str(cfg_file), *over, "trainer.world_size=2",
                           "--out", str(tmp_path / "two")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    two = json.loads(proc.stdout[proc.stdout.index("{"):])
    one = run_sft(load_config(cfg_file, over), tmp_path / "one")
    assert two["final_loss"] == pytest.approx(one["final_loss"], abs=1e-5)
    rows = [json.loads(x) for x in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and rows[-1]["shard/sent_bytes"] > 0  # accounting reaches the metrics
    a, b = load_policy(two["model"])[0].state_dict(), load_policy(one["model"])[0].state_dict()
    for k, v in b.items():
        assert (a[k] - v).abs().max() <= 1e-4, k
    assert not (tmp_path / "two" / "rank1").exists()  # followers write nothing
