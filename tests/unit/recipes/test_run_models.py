"""The composition root opens the run's second models (`models:`) for every recipe, and the CLI's
unjudged-table check reads only the summary the recipe wrote."""

from __future__ import annotations

import pytest

from posttrain.config_schema import RunConfig
from posttrain.errors import ConfigError, PosttrainError
from posttrain.models.service import active_service
from posttrain.recipes.pipeline import run_recipe


class JudgeProbe:
    """A recipe that does nothing but ask, mid-training, which model answers as "judge"."""

    title, summary_file, sandboxed, resumable = "probe", "probe_summary.json", False, False

    def __init__(self) -> None:
        self.seen = None

    def splits(self, cfg):
        return None

    async def base(self, ctx):
        return None, None

    async def warm_up(self, ctx):
        return ctx.model, ctx.tok

    async def evaluate(self, ctx, when):
        return None

    async def train(self, ctx):
        self.seen = active_service("judge").model_id

    def summarize(self, ctx, before, after):
        return {}

    def finish(self, ctx, summary):
        return None


def test_every_recipe_runs_with_the_configs_models_open_by_name(tmp_path):
    probe = JudgeProbe()
    run_recipe(probe, RunConfig.model_validate({"models": {"judge": {"path": "tiny"}}}), tmp_path / "run")
    assert probe.seen == "tiny"
    with pytest.raises(ConfigError, match="second model 'judge' is not open"):  # closed with the run
        active_service("judge")


def test_the_cli_fails_a_table_over_too_few_judged_tasks(tmp_path):
    from posttrain.cli.train import _fail_on_unjudged

    summary = {"n_tasks": 10, "infra_errors": {"before": 0, "after": 5}, "infra_error_threshold": 0.2}
    with pytest.raises(PosttrainError, match="5 of 15 tasks were infrastructure errors, over rl.infra_error.threshold 20%"):
        _fail_on_unjudged(summary, tmp_path)
    _fail_on_unjudged({**summary, "infra_errors": {"before": 0, "after": 2}}, tmp_path)  # 2 of 12 is under 20%
