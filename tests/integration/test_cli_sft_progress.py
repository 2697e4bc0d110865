"""`posttrain sft` without a terminal (CI logs, `| tee`): plain progress lines, then the summary."""

import json

from tests.unit.train.sharded.sft_case import sft_case
from posttrain.testing.cli_fork import run_cli


def test_sft_off_a_terminal_logs_one_line_every_tenth_of_the_run_ending_at_its_true_count(tmp_path):
    cfg_file, over = sft_case(tmp_path)
    over = [o for o in over if not o.startswith(("sft.steps", "trainer."))] + ["sft.steps=20"]
    out = run_cli(["sft", str(cfg_file), *over, "--out",
                          str(tmp_path / "run")], timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [x for x in out.stdout.splitlines() if x.startswith("sft ")]
    assert [x.split()[1] for x in lines] == [f"{s}/20" for s in range(2, 21, 2)]
    assert all("loss " in x for x in lines)
    assert all(" eta " in x for x in lines[1:-1]) and " eta " not in lines[-1]  # time left, until the last step
    assert json.loads(out.stdout[out.stdout.index("{"):])["final_loss"] > 0
