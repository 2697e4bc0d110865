"""`posttrain tasks check FILE`: the soundness check and the hack probes on the tasks of a file."""

import asyncio
import json

from posttrain.verifiers.soundness.check import check_file_with_probes


def _rows(tmp_path, rows):
    from posttrain.tasks.io import save_tasks
    from posttrain.tasks.trl_rows import load_trl_rows

    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "tasks.jsonl"
    save_tasks(load_trl_rows(src, domain="imported"), out)
    return out


def test_imported_rows_of_an_unregistered_domain_are_checked_and_sound(tmp_path):
    path = _rows(tmp_path, [{"prompt": f"{a}+{a}?", "answer": str(2 * a)} for a in range(3, 7)])
    ((report, probes),) = asyncio.run(check_file_with_probes(path, n=4, repeats=2, probe_n=2))
    assert report.domain == "imported" and report.n == 4 and report.sound
    assert probes.hack_pass_rate == 0.0 and probes.sound


def test_tasks_without_an_oracle_are_named_and_make_the_file_unsound(tmp_path):
    from posttrain.tasks.io import load_tasks, save_tasks
    import dataclasses

    path = _rows(tmp_path, [{"prompt": "1+1?", "answer": "2"}])
    bare = [dataclasses.replace(t, oracle=None) for t in load_tasks(path)]
    save_tasks(bare, path)
    ((report, _),) = asyncio.run(check_file_with_probes(path, n=4, repeats=1, probe_n=0))
    assert not report.sound and "1 of 1 tasks have no oracle answer" in report.failures[0]
