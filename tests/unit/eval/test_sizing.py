"""`eval --limit N`: a seeded sample stratified by domain; the p-value format of every table."""

from posttrain.eval.sizing import Estimate, stratified_sample
from posttrain.eval.stats import fmt_p
from posttrain.types import Message, Spec, Task


def _tasks(counts: dict[str, int]) -> tuple[Task, ...]:
    return tuple(Task(id=f"{d}-{i}", domain=d, prompt=(Message("user", f"q {i}"),), verifier=Spec("exact_numeric"))
                 for d, n in counts.items() for i in range(n))


def _per_domain(tasks) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in tasks:
        out[t.domain] = out.get(t.domain, 0) + 1
    return out


def test_each_domain_keeps_its_share():
    assert _per_domain(stratified_sample(_tasks({"a": 60, "b": 30, "c": 10}), 10, seed=0)) == {"a": 6, "b": 3, "c": 1}


def test_a_small_domain_keeps_one_task_while_n_allows():
    assert _per_domain(stratified_sample(_tasks({"a": 98, "b": 2}), 5, seed=0)) == {"a": 4, "b": 1}


def test_the_sample_has_exactly_n_tasks_in_suite_order():
    tasks = _tasks({"a": 7, "b": 5, "c": 3})
    got = stratified_sample(tasks, 8, seed=3)
    assert len(got) == 8 and list(got) == [t for t in tasks if t in got]


def test_the_same_seed_gives_the_same_tasks_and_another_seed_others():
    tasks = _tasks({"a": 50, "b": 50})
    assert stratified_sample(tasks, 10, seed=1) == stratified_sample(tasks, 10, seed=1)
    assert stratified_sample(tasks, 10, seed=1) != stratified_sample(tasks, 10, seed=2)


def test_a_limit_at_or_over_the_suite_size_keeps_every_task():
    tasks = _tasks({"a": 3})
    assert stratified_sample(tasks, 3, seed=0) == tasks and stratified_sample(tasks, 30, seed=0) == tasks


def test_the_estimate_is_the_rate_so_far_times_the_samples_left():
    e = Estimate(total=40, done=4, elapsed_s=12.0)
    assert e.per_sample_s == 3.0 and e.remaining_s == 108.0 and "eta 2 min" in e.line()


def test_small_p_values_are_scientific_not_zero():
    assert fmt_p(4.9e-5) == "4.9e-05" and fmt_p(0.0312) == "0.0312" and fmt_p(float("nan")) == "nan"
