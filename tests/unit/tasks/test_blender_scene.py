"""blender_scene without bpy: argument validation, the generator, the scoring on a recorded report.

The recorded report (tests/fixtures/blender/oracle_report.json) is what the verifier's fresh
Blender measured on the saved file of a difficulty-3 oracle chain (hole, row, light, camera);
the tests here attack the scoring with the doctored reports a hostile scene would give.
The tests that run real Blender are in test_blender_runtime.py (skipped without `make blender`).
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest

from posttrain.errors import ConfigError
from posttrain.tasks.blender_scene import BlenderSceneDomain, expected_bounds, hack_plans
from posttrain.tasks.plan import parse_plan
from posttrain.tasks.tools_impl import ToolError, call_tool
from posttrain.verifiers.blender_scene import score_report

FIXTURE = json.loads((Path(__file__).parents[2] / "fixtures" / "blender" / "oracle_report.json").read_text())


def _fixture():
    return copy.deepcopy(FIXTURE["target"]), copy.deepcopy(FIXTURE["report"])


def _mesh(report, name):
    return next(o for o in report["objects"] if o["name"] == name)


@pytest.mark.parametrize("name,args", [
    ("blender_add_primitive", {"name": "box", "shape": "teapot"}),
    ("blender_add_primitive", {"name": "box", "shape": "cube", "scale": [1, 0, 1]}),
    ("blender_add_primitive", {"name": "box", "shape": "cube", "location": [float("nan"), 0, 0]}),
    ("blender_add_primitive", {"name": "1box", "shape": "cube"}),
    ("blender_set_transform", {"name": "box"}),
    ("blender_add_material", {"name": "m", "color": [1.2, 0, 0]}),
    ("blender_add_modifier", {"object": "box", "type": "array", "count": 1000}),
    ("blender_add_modifier", {"object": "box", "type": "bevel", "count": 3}),
    ("blender_add_modifier", {"object": "box", "type": "boolean"}),
    ("blender_set_camera", {"location": [0, 0, 1]}),
    ("blender_add_light", {"name": "key", "type": "laser", "location": [0, 0, 1]}),
])
def test_bad_arguments_are_observations_and_start_no_blender(name, args):
    state: dict = {}
    with pytest.raises(ToolError):
        asyncio.run(call_tool(name, args, state))
    assert state.get("blender") is None


def test_generator_is_seeded():
    a = BlenderSceneDomain().generate(3, seed=5, difficulty=2)
    b = BlenderSceneDomain().generate(3, seed=5, difficulty=2)
    assert [t.oracle for t in a] == [t.oracle for t in b] and a[0].oracle != a[1].oracle


@pytest.mark.parametrize("difficulty,count", [(0, 2), (1, 3), (2, 4), (3, 5)])
def test_difficulty_sets_object_count(difficulty, count):
    for t in BlenderSceneDomain().generate(4, seed=1, difficulty=difficulty):
        assert len(t.metadata["target"]["objects"]) == count


def test_difficulty_two_asks_for_an_array_row_and_a_boolean_hole():
    for t in BlenderSceneDomain().generate(4, seed=1, difficulty=2):
        objs = t.metadata["target"]["objects"]
        assert objs[0]["hole"] and objs[-1]["array"]
        tools = [s["arguments"].get("type") for s in parse_plan(t.oracle) if s.get("tool") == "blender_add_modifier"]
        assert sorted(tools) == ["array", "boolean"]


def test_camera_only_from_difficulty_three():
    assert all("camera" not in t.metadata["target"] for t in BlenderSceneDomain().generate(4, 2, difficulty=2))
    assert all("camera" in t.metadata["target"] for t in BlenderSceneDomain().generate(4, 2, difficulty=3))


def test_oracle_chain_ends_by_saving():
    for t in BlenderSceneDomain().generate(6, seed=3, difficulty=3):
        steps = parse_plan(t.oracle)
        assert steps[-2] == {"tool": "blender_save", "arguments": {}} and "answer" in steps[-1]


def test_no_object_starts_at_the_origin_with_default_size():
    for t in BlenderSceneDomain().generate(20, seed=4, difficulty=1):
        for o in t.metadata["target"]["objects"]:
            assert expected_bounds(o) != ([-1.0, -1.0, -1.0], [1.0, 1.0, 1.0])


def test_recorded_oracle_report_passes():
    target, report = _fixture()
    score, passed, details = score_report(target, report)
    assert (score, passed) == (1.0, True), details


def test_object_moved_by_five_centimetres_loses_that_object():
    target, report = _fixture()
    m = _mesh(report, target["objects"][-1]["name"])  # the last object: no other one is placed relative to it
    m["min"][0] += 0.05
    m["max"][0] += 0.05
    score, passed, details = score_report(target, report)
    assert not passed and score == pytest.approx((details["items"] - 1) / details["items"])


def test_extra_visible_mesh_fails_and_dilutes_the_score():
    target, report = _fixture()
    report["objects"].append({**_mesh(report, target["objects"][0]["name"]), "name": "junk"})
    score, passed, details = score_report(target, report)
    assert not passed and details["extra_objects"] == ["junk"] and score < 1.0


def test_hidden_boolean_cutter_is_not_an_extra_object():
    target, report = _fixture()
    assert any(not o["visible"] for o in report["objects"])
    assert score_report(target, report)[2]["extra_objects"] == []


def test_hole_without_its_boolean_fails_on_volume_and_modifier():
    target, report = _fixture()
    holed = next(o for o in target["objects"] if o.get("hole"))
    m = _mesh(report, holed["name"])
    m["modifiers"] = []
    m["volume"] = holed["size"][0] * holed["size"][1] * holed["size"][2]
    problems = score_report(target, report)[2]["problems"]
    assert any("no boolean" in p for p in problems) and any("volume" in p for p in problems)


def test_a_box_where_a_round_shape_was_asked_fails_on_volume():
    target, report = _fixture()
    round_obj = next(o for o in target["objects"] if o["shape"] != "cube")
    m = _mesh(report, round_obj["name"])
    m["volume"] = round_obj["size"][0] * round_obj["size"][1] * round_obj["size"][2]  # same bounds, a box's volume
    assert any(p.startswith(f"{round_obj['name']}: volume") for p in score_report(target, report)[2]["problems"])


def test_wrong_material_value_fails():
    target, report = _fixture()
    _mesh(report, target["objects"][0]["name"])["materials"][0]["roughness"] += 0.2
    assert not score_report(target, report)[1]


def test_broken_relation_fails_even_when_the_object_is_where_the_numbers_say():
    target, report = _fixture()
    rel_obj = next(o for o in target["objects"] if o.get("relation"))
    rel_obj["relation"] = {"kind": "on_top_of", "of": target["objects"][0]["name"]}
    assert any("relation" in p for p in score_report(target, report)[2]["problems"])


def test_empty_scene_scores_zero():
    target, report = _fixture()
    report["objects"] = []
    assert score_report(target, report)[0] == 0.0


def test_names_at_the_origin_score_zero():
    target, report = _fixture()
    for o in report["objects"]:
        if o["type"] == "mesh":
            o["min"], o["max"] = [-1.0, -1.0, -1.0], [1.0, 1.0, 1.0]
        o["location"] = [0.0, 0.0, 0.0]
    assert score_report(target, report)[0] == 0.0


def test_one_huge_object_scores_zero():
    target, report = _fixture()
    first = target["objects"][0]["name"]
    report["objects"] = [{**_mesh(report, first), "min": [-50.0] * 3, "max": [50.0] * 3, "volume": 1e6}]
    assert score_report(target, report)[0] == 0.0


def test_hack_plans_cover_the_probes():
    t = BlenderSceneDomain().generate(1, seed=0, difficulty=1)[0]
    assert set(hack_plans(t)) == {"empty_scene", "names_without_placement", "one_huge_object"}


def test_domain_refused_at_config_load_without_runtime(tmp_path, monkeypatch):
    from posttrain.config import load_config
    from posttrain.config_check import check_config

    monkeypatch.setenv("POSTTRAIN_BLENDER_VENV", str(tmp_path / "none"))
    cfg = load_config(None, ["tasks.domains={blender_scene: {}}"])
    with pytest.raises(ConfigError, match="make blender"):
        check_config(cfg, needs=("tasks",))
