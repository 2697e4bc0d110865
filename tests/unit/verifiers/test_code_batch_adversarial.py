"""Adversarial: in a batched GRPO group of `python_tests` answers, an answer scores exactly
what it scores alone: it can neither copy its siblings nor kill them."""

import asyncio

import pytest

from posttrain.sandbox import SandboxPool
from posttrain.tasks import generate_domain
from posttrain.types import Trajectory, Turn
from posttrain.verifiers.run import VerifierRunner

TASK = generate_domain("code", 1, seed=0)[0]
M, C = TASK.metadata["m"], TASK.metadata["c"]

# Looks for sibling answers everywhere (answers.json, __main__, every list/dict in its
# memory, /proc/*/cmdline) and returns the value the first one that works gives.
COPY = '''
import gc, json, os, sys
r, srcs = None, []
try:
    srcs += json.load(open("answers.json"))
except Exception:
    pass
srcs += [v for v in vars(sys.modules["__main__"]).values() if type(v) is str]
for o in gc.get_objects():
    vals = o if type(o) is list else o.values() if type(o) is dict else ()
    srcs += [v for v in vals if type(v) is str and len(v) < 200]
for p in os.listdir("/proc"):
    try:
        srcs += open("/proc/%s/cmdline" % p).read().split("\\0")
    except Exception:
        pass
for s in srcs:
    if "x" in s and "exec" not in s and "import" not in s:
        try:
            r = eval(s, {"x": x})
            if type(r) is int:
                break
        except BaseException:
            pass
'''
# Correct, and on every call forks a process that kills every other child of its parent.
KILL = f'''
import os, time
r = x * {M} + {C}
rp, mine = os.getppid(), os.getpid()
if os.fork() == 0:
    end = time.time() + 3
    while time.time() < end:
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) not in (mine, os.getpid()):
                try:
                    if int(open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[1]) == rp:
                        os.kill(int(p), 9)
                except Exception:
                    pass
        time.sleep(0.001)
    os._exit(0)
'''


def as_expr(code: str) -> str:
    return f"(lambda g: exec({code!r}, g) or g['r'])({{'x': x}})"


GROUP = [as_expr(KILL), as_expr(COPY), TASK.oracle, f"{C}+x*{M}", f"x*{M}+{C + 1}",
         f"str(x*{M}+{C})", f"type('A', (), {{'__eq__': lambda s, o: True}})()",
         f"__import__('builtins').type('I', (int,), {{'__eq__': lambda s, o: True}})(0)"]
EXPECTED = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def traj(text: str, sample: int = 0) -> Trajectory:
    return Trajectory(TASK.id, TASK.version, TASK.domain, (), (Turn("assistant", text),), finish_reason="stop", sample=sample)


async def _batched_and_alone(mode: str):
    pool = SandboxPool(mode=mode)
    try:
        group = await VerifierRunner(pool).verify_all({TASK.id: TASK}, [traj(a, i) for i, a in enumerate(GROUP)])
        alone = [await VerifierRunner(pool).verify_one(TASK, traj(a)) for a in GROUP]
        return [g.verify for g in group], [a.verify for a in alone]
    finally:
        await pool.close()


@pytest.fixture(scope="module", params=["pooled", "fresh"])
def results(request):
    return asyncio.run(_batched_and_alone(request.param))


def test_every_answer_scores_in_its_group_what_it_scores_alone(results):
    group, alone = results
    assert [r.score for r in group] == [r.score for r in alone]


def test_killer_and_copier_gain_nothing_and_siblings_lose_nothing(results):
    group, _ = results
    assert [r.score for r in group] == EXPECTED
    assert all(r.status == "ok" for r in group)  # a killed sibling would be a failure or infra error


def test_a_fenced_multi_line_expression_is_real_code():
    fenced = f"```python\n(x * {M}\n + {C})\n```"
    res = asyncio.run(_one(fenced))
    assert res.score == 1.0 and res.status == "ok"


async def _one(text: str):
    pool = SandboxPool()
    try:
        return (await VerifierRunner(pool).verify_one(TASK, traj(text))).verify
    finally:
        await pool.close()
