"""examples/vision.yaml is documented as the vision quickstart's defaults; it must stay so."""

from pathlib import Path

from posttrain.recipes.vision import vision_config

ROOT = Path(__file__).resolve().parents[3]


def test_the_example_config_equals_the_vision_quickstart_defaults():
    assert vision_config(ROOT / "examples" / "vision.yaml").model_dump() == vision_config(None).model_dump()
