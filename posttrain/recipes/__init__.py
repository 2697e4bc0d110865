"""Recipes: the pipelines a command runs (splits -> base model -> SFT -> eval -> RL -> eval ->
summary) and their presets, as YAML files in `presets/` (see `presets.load_preset`).

`quickstart.py` is the text RL recipe (`posttrain quickstart`, `posttrain rl`), `vision.py`
the image one (`posttrain quickstart --vision`). A recipe holds no algorithm logic: it calls
train/, eval/ and rollout/. Ray is chosen here (`cluster.py`), never inside train/.
"""
