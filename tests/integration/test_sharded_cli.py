"""`posttrain sft CONFIG trainer.world_size=2` re-runs itself as 2 ranks (FSDP2 on gloo) and
writes the same model as the one-process recipe (within 1e-4 per weight after 3 steps)."""


import pytest
from posttrain.testing.cli_fork import run_cli


@pytest.mark.slow
def test_sft_cli_on_two_ranks_writes_the_one_process_model(tmp_path):
    from tests.unit.train.sharded.sft_case import assert_writes_the_one_process_model, sft_case

    cfg_file, over = sft_case(tmp_path)
    proc = run_cli(["sft", str(cfg_file), *over, "trainer.world_size=2",
                           "--out", str(tmp_path / "two")], timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert_writes_the_one_process_model(proc.stdout, cfg_file, over, tmp_path / "two", tmp_path / "one")
    assert not (tmp_path / "two" / "rank1").exists()  # followers write nothing
