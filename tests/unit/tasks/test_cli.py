import json

from typer.testing import CliRunner

from posttrain.cli.main import app


def test_tasks_check_json_prints_one_object_per_domain():
    res = CliRunner().invoke(app, ["tasks", "check", "math", "conflict", "--n", "5", "--repeats", "2", "--json"])
    assert res.exit_code == 0, res.output
    objs = [json.loads(line) for line in res.output.splitlines()]
    assert [o["domain"] for o in objs] == ["math", "conflict"]
    for o in objs:
        assert {"domain", "n", "oracle_pass_rate", "empty_pass_rate", "wrong_pass_rate", "flake_rate"} <= set(o)
        assert (o["oracle_pass_rate"], o["empty_pass_rate"], o["wrong_pass_rate"], o["flake_rate"]) == (1.0, 0.0, 0.0, 0.0)


def test_generate_then_validate(tmp_path):
    out = tmp_path / "t.yaml"
    assert CliRunner().invoke(app, ["tasks", "generate", "tools", "--n", "3", "--out", str(out)]).exit_code == 0
    res = CliRunner().invoke(app, ["tasks", "validate", str(out)])
    assert res.exit_code == 0 and "3 tasks ok" in res.output
