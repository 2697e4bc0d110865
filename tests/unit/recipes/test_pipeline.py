"""The one pipeline (recipes/pipeline.py): stage order, what it writes, and when, for any recipe."""

import json

import pytest

from posttrain.config import load_config
from posttrain.errors import ConfigError
from posttrain.recipes.pipeline import RunContext, get_recipe, run_recipe
from posttrain.registry import registry
from posttrain.tasks.splits import Splits


class Recorder:
    """A recipe whose stages only record their order and what the pipeline had done by then."""

    title, summary_file, sandboxed, resumable = "test recipe", "test_summary.json", False, False

    def __init__(self, fail_splits: bool = False) -> None:
        self.calls: list[str] = []
        self.fail_splits = fail_splits

    def splits(self, cfg):
        self.calls.append("splits")
        if self.fail_splits:
            raise ConfigError("task ids repeat")
        return None

    async def base(self, ctx: RunContext):
        self.calls.append(f"base config.yaml={(ctx.run_dir / 'config.yaml').is_file()}")
        return "model", "tok"

    async def warm_up(self, ctx: RunContext):
        self.calls.append(f"warm_up {ctx.model}")
        return "warm", ctx.tok

    async def evaluate(self, ctx: RunContext, when: str):
        self.calls.append(f"evaluate {when} {ctx.model}")
        return {"before": 0.25, "after": 0.75}[when]

    async def train(self, ctx: RunContext):
        self.calls.append("train")

    def summarize(self, ctx: RunContext, before, after):
        self.calls.append("summarize")
        return {"before": before, "after": after}

    def finish(self, ctx: RunContext, summary):
        self.calls.append(f"finish {sorted(summary)}")


def test_stages_run_in_designs_order_each_seeing_the_last_ones_model(tmp_path):
    r = Recorder()
    run_recipe(r, load_config(None, []), tmp_path / "run")
    assert r.calls == ["splits", "base config.yaml=True", "warm_up model", "evaluate before warm", "train",
                       "evaluate after warm", "summarize", "finish ['after', 'before', 'phase_s', 'wall_s']"]


def test_the_summary_file_holds_the_recipes_summary_with_wall_time_and_every_stage_timed(tmp_path):
    s = run_recipe(Recorder(), load_config(None, []), tmp_path / "run")
    on_disk = json.loads((tmp_path / "run" / "test_summary.json").read_text())
    assert on_disk == s and (s["before"], s["after"]) == (0.25, 0.75)
    assert set(s["phase_s"]) == {"splits_s", "base_s", "sft_s", "eval_before_s", "train_s", "eval_after_s"}
    assert s["wall_s"] >= sum(s["phase_s"].values()) - 1e-6
    assert (tmp_path / "run" / "report.html").is_file()


def test_a_refused_split_writes_nothing(tmp_path):
    with pytest.raises(ConfigError, match="task ids repeat"):
        run_recipe(Recorder(fail_splits=True), load_config(None, []), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["rl", "vision", "agent", "sft", "dpo"])
def test_every_recipe_is_reachable_by_name_and_declares_its_files(name):
    r = get_recipe(name)
    assert r.summary_file.endswith(".json") and r.title.startswith("posttrain")
    assert name in registry("recipe").names()


def test_an_unknown_recipe_is_a_config_error_naming_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown recipe 'nope'; known: .*agent.*rl"):
        get_recipe("nope")


def test_the_rl_recipe_pins_its_splits_in_the_run_directory(tmp_path):
    from posttrain.recipes.quickstart import TextRL

    class SplitsOnly(TextRL):  # the real splits and pinning; no model
        async def base(self, ctx):
            raise KeyboardInterrupt  # stop right after the pipeline's set-up

    cfg = load_config(None, ["tasks.domains={arithmetic: {n_train: 6, n_eval: 3}}"])
    with pytest.raises(KeyboardInterrupt):
        run_recipe(SplitsOnly(), cfg, tmp_path / "run")
    pinned = sorted(p.name for p in (tmp_path / "run" / "tasks").iterdir())
    assert pinned and (tmp_path / "run" / "config.yaml").is_file()
    assert isinstance(TextRL().splits(cfg), Splits)
