"""Recipes: the one pipeline every command runs (`pipeline.py`: splits -> base model -> SFT ->
eval -> RL or DPO -> eval -> summary and report) and their presets, as YAML files in `presets/`
(see `presets.load_preset`).

Each recipe is a `pipeline.Recipe` registered by name, and says only what its stages do:
`rl` in `quickstart.py` (`posttrain quickstart`, `posttrain rl`, the real-model presets),
`vision` (`quickstart --vision`), `agent` (`quickstart --agent`), `sft`, `dpo` and `distill`. A recipe
holds no algorithm logic: it calls train/, eval/ and rollout/. Ray is chosen here
(`cluster.py`), never inside train/.
"""
