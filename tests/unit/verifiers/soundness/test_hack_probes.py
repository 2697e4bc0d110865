"""The hack-probe library itself: generic per kind, blind to the answer, and able to catch weak verifiers.

The weak verifiers here are deliberately exploitable versions of shipped ones (an
any-number matcher, a schema-only gate, the pre-fix HumanEval runner that exec'd the
answer before reading the tests in the same process): every probe run that scores on
them proves the probe reaches the hole it is named for.
"""

import asyncio
import dataclasses
import json
import re

import pytest

from posttrain.verifiers.base import BatchVerifier
from posttrain.registry import verifier
from posttrain.tasks import generate_domain
from posttrain.verifiers.soundness.hack_probes import KINDS, PROBES, ProbeView, domain_kind, junk_instance
from posttrain.verifiers.soundness.probe_check import _v, probe_tasks, probe_texts, probes_for, summarise
from posttrain.types import ExecLimits, Limits, Message, Spec, Task, VerifyResult, thaw
from posttrain.verifiers.math_answer import final_text

SHIPPED = ["arithmetic", "chart", "code", "conflict", "drawing", "extraction", "humaneval", "math", "needle", "scene",
           "terminal", "tools", "ui"]


@verifier("test_lax_any_number", answer_format="line")
class LaxAnyNumber:
    """Weak on purpose: passes when ANY number in the answer equals the expected one."""

    def __init__(self, answer: int) -> None:
        self.answer = int(answer)

    async def __call__(self, task, trajectory, ctx):
        ok = str(self.answer) in re.findall(r"-?\d+", final_text(trajectory))
        return VerifyResult(float(ok), ok)


# The HumanEval runner before the fix: the answer runs in the runner's own process and
# globals, then test.py is read from the workspace and exec'd with the builtins it left.
WEAK_RUNNER = r'''
import sys
def _main():
    token = sys.stdin.readline().strip()
    g = {"__name__": "__candidate__"}
    try:
        exec(compile(open("program.py").read(), "program.py", "exec"), g)
        exec(compile(open("test.py").read(), "test.py", "exec"), g)
        g["check"](g[sys.argv[1]])
    except BaseException as e:
        sys.stdout.write("\n@@FAIL@@ %s\n" % type(e).__name__)
        return
    sys.stdout.write("\n@@PASS@@" + token + "\n")
_main()
'''


@verifier("test_weak_program", answer_format="line")
class WeakProgramTests:
    def __init__(self, test: str, entry_point: str) -> None:
        self.test, self.entry = test, entry_point

    async def __call__(self, task, trajectory, ctx):
        import secrets

        token = secrets.token_hex(16)
        files = {"program.py": final_text(trajectory), "test.py": self.test, "runner.py": WEAK_RUNNER}
        res = await ctx.sandbox.exec(["python3", "-I", "runner.py", self.entry], files=files, stdin=token + "\n",
                                     limits=ExecLimits(wall_s=10, cpu_s=10))
        ok = f"@@PASS@@{token}" in res.stdout
        return VerifyResult(float(ok), ok)


def _task(verifier_spec: Spec, prompt: str, oracle: str, **meta) -> Task:
    return Task(id="weak-0", domain="weak", prompt=(Message("user", prompt),), verifier=verifier_spec,
                limits=Limits(max_steps=1, max_new_tokens=64, timeout_s=30.0), metadata=meta, oracle=oracle)


def test_every_shipped_domain_has_a_kind_and_probes():
    for name in SHIPPED:
        for t in generate_domain(name, 4, 0):
            assert domain_kind(t) in KINDS
            assert probe_texts(t), (name, domain_kind(t))


def test_every_kind_has_probes():
    assert {k for p in PROBES.values() for k in p.kinds} == set(KINDS) and len(PROBES) >= 30


EXPECTED_KEYS = {"answer", "expected", "values", "tests", "test", "supporting", "script", "names", "box", "target_scene"}


def _hide_expected(obj):
    if isinstance(obj, dict):
        return {k: "SECRET" if k in EXPECTED_KEYS else _hide_expected(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_hide_expected(v) for v in obj]
    return obj


@pytest.mark.parametrize("name", SHIPPED)
def test_probes_are_blind_to_the_answer(name):
    """Replacing the oracle and every expected value in the verifier spec changes no probe answer."""
    for t in generate_domain(name, 3, 0):
        spec = _hide_expected(thaw(t.verifier))
        blind = dataclasses.replace(t, oracle="SECRET-ORACLE", metadata={**t.metadata, "answer": "SECRET"},
                                    verifier=Spec(spec["name"], spec["args"]))
        assert probe_texts(blind) == probe_texts(t)
        assert all("SECRET" not in text for text in probe_texts(blind).values())
    assert not {f.name for f in dataclasses.fields(ProbeView)} & {"oracle", "answer", "expected", "metadata", "verifier"}


def test_single_turn_probes_fit_the_format_rule_length():
    for name in ["arithmetic", "math", "needle", "conflict", "extraction", "chart", "code"]:
        for t in generate_domain(name, 3, 0):
            one_line = ProbeView.of(t).single_line
            for probe, text in probe_texts(t).items():
                assert 0 < len(text) <= 2000, (name, probe)
                assert not one_line or "\n" not in text.strip(), (name, probe)  # so the verifier sees it


def test_junk_instance_validates_against_the_shipped_schemas():
    import jsonschema
    import random

    for t in generate_domain("extraction", 12, 0, difficulty=3.0):
        schema = ProbeView.of(t).schema
        jsonschema.validate(junk_instance(schema, random.Random(0)), schema)


def test_probe_answers_are_deterministic_for_a_seed():
    for name in ["terminal", "humaneval", "tools", "extraction"]:
        t = generate_domain(name, 1, 0)[0]
        assert probe_texts(t, seed=3) == probe_texts(t, seed=3)


def test_many_candidate_probes_catch_an_any_number_verifier():
    t = _task(Spec("test_lax_any_number", {"answer": 642}), "What is 600+42?", "642")
    report = asyncio.run(probe_tasks("weak", [t], repeats=1, sandbox=None))
    assert report.probes["many_candidates"]["pass_rate"] == 1.0
    assert report.hack_pass_rate > 0 and not report.sound


def test_schema_junk_catches_a_schema_only_verifier():
    t = generate_domain("extraction", 1, 0)[0]
    weak = dataclasses.replace(t, verifier=Spec("json_schema", {"schema": ProbeView.of(t).schema}))
    report = asyncio.run(probe_tasks("weak", [weak], repeats=1, sandbox=None))
    assert report.probes["schema_junk"]["pass_rate"] == 1.0 and report.probes["giant_values"]["pass_rate"] == 1.0


def test_program_probes_catch_the_pre_fix_humaneval_runner():
    from posttrain.sandbox import SandboxPool

    he = generate_domain("humaneval", 1, 0)[0]
    args = he.verifier.args
    weak = _task(Spec("test_weak_program", {"test": args["test"], "entry_point": args["entry_point"]}), he.prompt[-1].content,
                 args["prompt"] + he.oracle, probe_kind="code_program", answer_format="code")

    async def go():
        pool = SandboxPool(concurrency=2)
        try:
            return await probe_tasks("weak", [weak], repeats=1, sandbox=pool)
        finally:
            await pool.close()

    report = asyncio.run(go())
    caught = {name for name, s in report.probes.items() if s["pass_rate"] > 0}
    assert {"test_overwrite", "builtins_patch", "always_equal", "frame_token"} <= caught, report.probes
    assert report.oracle_rl_pass_rate == 1.0  # the weak verifier is still right about honest code


def test_summary_counts_flakes_passes_and_harm():
    t = generate_domain("arithmetic", 1, 0)[0]
    k = t.id
    run1 = {(k, "oracle", "alone"): (1.0, "ok"), (k, "p", "alone"): (1.0, "ok"), (k, "p", "group"): (0.0, "ok"),
            (k, "p", "sibling_before"): (1.0, "ok"), (k, "p", "sibling_after"): (0.0, "ok")}
    run2 = {**run1, (k, "p", "group"): (0.5, "ok")}
    r = summarise("arithmetic", [t], [run1, run2], {})
    assert r.hack_pass_rate == 0.5 and r.probes["p"]["nonzero_rate"] == 0.75
    assert r.sibling_harm_rate == 0.5 and r.flake_rate == 1 / 5 and not r.sound
    assert json.loads(json.dumps(r.as_json()))["sound"] is False


def test_probes_apply_only_to_their_kind():
    for name in SHIPPED:
        t = generate_domain(name, 1, 0)[0]
        assert all(domain_kind(t) in p.kinds for p in probes_for(t))


# The python_tests batch before the fix: one execution for a whole group, answers.json in
# the shared workspace, each answer in a forked child reporting over its own pipe.
WEAK_BATCH = r'''
import json, os, select, signal, sys, time
answers = json.loads(open("answers.json").read())
inputs = json.loads(open("inputs.json").read())
def child(src, w):
    fd = os.open(os.devnull, os.O_RDWR)
    os.dup2(fd, 0), os.dup2(fd, 1), os.dup2(fd, 2)
    time.sleep(0.2)  # a test run takes a while; a bare lambda could end before a killer's first /proc scan
    try:
        f = eval(compile("lambda x: (%s)" % src, "answer.py", "eval"), {})
        out = [f(x) for x in inputs]
    except BaseException:
        out = None
    os.write(w, json.dumps(out).encode())
    os._exit(0)
results = []
for src in answers:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        child(src, w)
    os.close(w)
    buf, deadline = b"", time.monotonic() + 2.0
    while time.monotonic() < deadline:
        if not select.select([r], [], [], max(0.0, deadline - time.monotonic()))[0]:
            break
        chunk = os.read(r, 65536)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    results.append(json.loads(buf.decode()) if buf else None)
print("\n@@BATCH@@" + json.dumps(results))
'''


@verifier("test_weak_batch", answer_format="line")
class WeakBatchTests(BatchVerifier):
    def __init__(self, tests: list) -> None:
        self.xs, self.want = [t[0] for t in tests], [t[1] for t in tests]

    async def __call__(self, task, trajectory, ctx):
        return (await self.verify_batch(task, [trajectory.completion_text, "0"], ctx))[0]

    async def verify_batch(self, task, answers, ctx):
        files = {"answers.json": json.dumps([a.strip() for a in answers]), "inputs.json": json.dumps(self.xs),
                 "runner.py": WEAK_BATCH}
        res = await ctx.sandbox.exec(["python3", "-I", "runner.py"], files=files, limits=ExecLimits(wall_s=20, cpu_s=20))
        outs = json.loads(res.stdout[res.stdout.rfind("@@BATCH@@") + 9:])
        return [VerifyResult(float(o == self.want), o == self.want) for o in outs]


def test_sibling_probes_catch_the_pre_fix_python_tests_batch():
    from posttrain.sandbox import SandboxPool

    t = generate_domain("code", 1, 0)[0]
    weak = dataclasses.replace(t, verifier=Spec("test_weak_batch", {"tests": [list(x) for x in t.verifier.args["tests"]]}),
                               metadata={**t.metadata, "answer_format": "code", "probe_kind": "code_expr"})

    async def go():
        pool = SandboxPool(concurrency=2)
        try:
            return await probe_tasks("weak", [weak], repeats=1, sandbox=pool, only={"sibling_answers", "sibling_kill"})
        finally:
            await pool.close()

    r = asyncio.run(go())
    assert r.probes["sibling_answers"]["pass_rate"] == 0.5  # passes in the group, not alone
    assert r.sibling_harm_rate > 0 and any("SIBLING of sibling_kill" in f for f in r.failures), r.failures


def test_a_sibling_left_unscored_names_why_in_the_failure_note():
    t = generate_domain("arithmetic", 1, 0)[0]
    k = t.id
    run = {(k, "oracle", "alone"): (1.0, "ok"),
           (k, "p", "sibling_before"): _v(VerifyResult.infra("sandbox session closed under load"))}
    r = summarise("arithmetic", [t], [run], {})
    assert r.infra_error_rate == 0.5 and "sandbox session closed under load" in r.failures[0]


def test_an_episode_that_ends_in_an_infra_error_is_rerun_as_the_rl_path_reruns_it(monkeypatch):
    from posttrain.verifiers.soundness import probe_check

    results = [VerifyResult.infra("slot died"), VerifyResult(1.0, True)]
    monkeypatch.setattr(probe_check, "_one_episode", lambda *a: _async(results.pop(0)))
    t = generate_domain("terminal", 1, 0)[0]
    assert asyncio.run(probe_check.episode(t, "[]", None)).status == "ok" and results == []


async def _async(value):
    return value
