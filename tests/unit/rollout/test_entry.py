"""The rollout entry (rollout/entry.py): one call scores one-step tasks and agent episodes alike."""

import dataclasses
import re
from pathlib import Path

from tests.unit.agent.conftest import ScriptedEngine, calc_task, run, tok  # noqa: F401  (tok: the fixture)

from posttrain.rollout.agent.toolcall import format_tool_call
from posttrain.rollout.engine import SamplingParams
from posttrain.rollout.entry import rollout_options, rollout_scored
from posttrain.tasks import generate_domain
from posttrain.verifiers.run import VerifierRunner

ARITH = generate_domain("arithmetic", 1, 0)[0]  # one step: "81+31=" -> 112


def policy(text: str) -> str:
    """Answers the arithmetic prompt at once; the calculator task with a tool call, then its result."""
    if ARITH.prompt[0].content in text:
        return str(ARITH.oracle)
    if "<|tool|>" in text:
        return f"The answer is {re.findall(r'<[|]tool[|]>(.*?)<[|]end[|]>', text)[-1]}."
    return format_tool_call("calculator", {"expression": "4821*937"})


class SampledEngine(ScriptedEngine):
    """The scripted engine with `params.n` samples per request (the agent loop asks one at a time)."""

    def generate(self, requests):
        out = []
        for r in requests:
            [c] = super().generate([r])
            out += [dataclasses.replace(c, index=k) for k in range(r.params.n)]
        return out


def scored(tok, tasks, n=2, on_generated=None):
    opts = rollout_options(SamplingParams(temperature=0.0, n=n, max_new_tokens=32))
    return run(rollout_scored(SampledEngine(tok, policy), tok, tasks, opts, VerifierRunner(None),
                              on_generated=on_generated))


def test_a_one_step_task_and_an_agent_task_both_come_back_scored(tok):
    trajs = scored(tok, [calc_task(), ARITH])
    assert [t.task_id for t in trajs] == ["calc-0", "calc-0", ARITH.id, ARITH.id]
    assert all(t.verify is not None and t.verify.passed for t in trajs)
    assert [t.num_steps for t in trajs] == [2, 2, 1, 1]  # the episode called the calculator, then answered


def test_groups_are_task_indices_in_the_callers_order(tok):
    trajs = scored(tok, [ARITH, calc_task()], n=3)
    assert [t.group for t in trajs] == [0, 0, 0, 1, 1, 1]
    assert [t.sample for t in trajs] == [0, 1, 2, 0, 1, 2]


def test_on_generated_sees_the_one_step_samples_before_they_are_scored(tok):
    seen = []
    trajs = scored(tok, [calc_task(), ARITH], n=1, on_generated=seen.extend)
    assert [t.task_id for t in seen] == [ARITH.id] and seen[0].verify is None
    assert trajs[1].verify is not None and trajs[1].completion_text == seen[0].completion_text


def test_the_multi_step_dispatch_is_written_once():
    """`max_steps > 1` (or its negation) is decided by types.is_multi_step alone; config_schema's
    docstring names the limit for users."""
    root = Path(__file__).resolve().parents[3] / "posttrain"
    pattern = re.compile(r"max_steps\s*(>|<=)\s*1\b")
    hits = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if pattern.search(p.read_text()))
    assert hits == ["config_schema.py", "types.py"]


def test_an_external_agent_without_a_proxy_is_refused_naming_the_wiring(tok):
    """agent.external's process reaches the engine through a proxy that only the composition root can
    build (serve/ sits above rollout/): a caller that forgets it gets one line saying what to pass."""
    import pytest

    from posttrain.rollout.agent.external import ExternalAgent

    opts = dataclasses.replace(rollout_options(SamplingParams(temperature=0.0, n=1)), external=ExternalAgent("true"))
    with pytest.raises(ValueError, match="no agent proxy was wired in"):
        run(rollout_scored(SampledEngine(tok, policy), tok, [calc_task()], opts, VerifierRunner(None)))


def test_the_recipe_wires_the_served_proxy_only_for_an_external_agent():
    from posttrain.config import load_config
    from posttrain.recipes.pipeline import RunContext
    from posttrain.serve.proxy_host import ServedProxy

    from posttrain.config_schema import ExternalAgentConfig

    plain = load_config(None, [])
    external = plain.model_copy(update={"agent": plain.agent.model_copy(
        update={"external": ExternalAgentConfig(command="python my_agent.py")})})
    ctx = lambda cfg: RunContext(cfg, Path("unused"), False, lambda *_: None, None)  # noqa: E731
    assert ctx(plain).agent_proxy() is None and ctx(external).agent_proxy() is ServedProxy
