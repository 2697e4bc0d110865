"""Models: the built-in tiny default and HF checkpoint loading/saving."""

from posttrain.models.io import load_policy, save_policy

__all__ = ["load_policy", "save_policy"]
