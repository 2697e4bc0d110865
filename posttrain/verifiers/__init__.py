"""Verifiers. Importing this package registers the built-in verifiers."""

from posttrain.verifiers import code_tests, numeric  # noqa: F401  (registers verifiers)
from posttrain.verifiers import blender_scene, citations, compose, extraction, humaneval, math_answer, needle, scene, terminal, text_match, tool_use  # noqa: F401  (registers verifiers)
from posttrain.verifiers import image_test  # noqa: F401  (registers image_test)
from posttrain.verifiers import page_cite, report_answer, ruler_values, table_cells  # noqa: F401  (registers the document verifiers)
from posttrain.verifiers import visual_answer  # noqa: F401  (registers the vision verifiers)
from posttrain.verifiers import bfcl  # noqa: F401  (registers bfcl)
from posttrain.verifiers import judge  # noqa: F401  (registers judge: a second model; models/service.py)
from posttrain.verifiers import tau2  # noqa: F401  (registers tau2: database-state reward of τ²-bench episodes)
from posttrain.verifiers import ifbench, math_verify  # noqa: F401  (optional packages, needed only when built)
from posttrain.verifiers import rg_answer  # noqa: F401  (reasoning-gym's checkers, wrapped; the package is needed only when built)
from posttrain.verifiers.base import Verifier, VerifyContext

__all__ = ["Verifier", "VerifyContext"]
