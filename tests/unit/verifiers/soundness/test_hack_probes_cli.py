"""`posttrain tasks check` with the hack probes: the table, the JSON, the options."""

import json

from typer.testing import CliRunner

from posttrain.cli.main import app


def _check(*args):
    return CliRunner().invoke(app, ["tasks", "check", *args])


def test_json_carries_the_probe_report_per_domain():
    res = _check("code", "math", "--n", "3", "--repeats", "1", "--probe-n", "2", "--json")
    assert res.exit_code == 0, res.output
    objs = [json.loads(line) for line in res.output.splitlines()]
    assert [o["domain"] for o in objs] == ["code", "math"]
    for o in objs:
        assert o["hack_pass_rate"] == 0.0 and o["probe_flake_rate"] == 0.0 and o["sound"] is True
        assert o["hack"]["n"] == 2 and o["hack"]["oracle_rl_pass_rate"] == 1.0
    assert {"sibling_answers", "sibling_kill", "early_exit", "fake_markers"} <= set(objs[0]["hack"]["probes"])
    assert {"many_candidates", "boxed_many", "marker_only"} <= set(objs[1]["hack"]["probes"])


def test_table_lists_every_probe_with_its_pass_rate():
    res = _check("extraction", "--n", "2", "--repeats", "1", "--probe-n", "1")
    assert res.exit_code == 0, res.output
    assert "RL path (1 tasks x 1)" in res.output and "hack_pass=0.000" in res.output
    for probe in ("schema_junk", "extra_keys", "giant_values", "empty_object"):
        assert any(line.split()[:1] == [probe] for line in res.output.splitlines()), probe


def test_probe_filter_and_no_probes():
    res = _check("arithmetic", "--n", "2", "--repeats", "1", "--probe-n", "1", "--probe", "marker_only", "--json")
    assert list(json.loads(res.output)["hack"]["probes"]) == ["marker_only"]
    res = _check("arithmetic", "--n", "2", "--repeats", "1", "--probe-n", "0", "--json")
    assert res.exit_code == 0 and "hack" not in json.loads(res.output)


def test_a_passing_probe_makes_the_domain_unsound(tmp_path, monkeypatch):
    from posttrain.registry import registry

    for kind in ("domain", "verifier"):  # the plugin registers in-process: gone again after this test
        reg = registry(kind)
        monkeypatch.setattr(reg, "_items", dict(reg._items))
        monkeypatch.setattr(reg, "_props", dict(reg._props))
    plugin = tmp_path / "lax.py"
    plugin.write_text('''
import random, re
from posttrain.registry import domain, verifier
from posttrain.types import Limits, Message, Spec, Task, VerifyResult

@verifier("lax_any_number_cli", answer_format="line")
class Lax:
    def __init__(self, answer): self.answer = str(answer)
    async def __call__(self, task, traj, ctx):
        ok = self.answer in re.findall(r"-?\\d+", traj.completion_text)
        return VerifyResult(float(ok), ok)

@domain("lax_sums")
class LaxSums:
    name = "lax_sums"
    def generate(self, n, seed, difficulty=1.0):
        rng = random.Random(seed)
        out = []
        for i in range(n):
            a, b = rng.randrange(10, 99), rng.randrange(10, 99)
            out.append(Task(id=f"lax-{i}", domain=self.name, prompt=(Message("user", f"{a}+{b}="),),
                            verifier=Spec("lax_any_number_cli", {"answer": a + b}), limits=Limits(), oracle=str(a + b)))
        return out
    def wrong_answer(self, task, rng):
        return str(int(task.oracle) + 1)
''')
    res = _check("lax_sums", "--plugin", str(plugin), "--n", "2", "--repeats", "1", "--probe-n", "2")
    assert res.exit_code == 1, res.output
    assert "UNSOUND" in res.output and "<- HACK" in res.output and "HACK many_candidates passes" in res.output
