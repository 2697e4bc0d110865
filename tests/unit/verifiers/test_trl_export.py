import pytest

from posttrain.tasks import generate_domain
from posttrain.verifiers.trl_export import tasks_to_trl_rows, trl_reward_func


def test_reward_func_from_task_column_scores_any_domain():
    tasks = generate_domain("extraction", 2, 0) + generate_domain("conflict", 2, 0)
    rows = tasks_to_trl_rows(tasks)
    reward = trl_reward_func()
    completions = [[{"role": "assistant", "content": t.oracle}] for t in tasks]
    assert reward(completions, task=[r["task"] for r in rows]) == [1.0] * 4
    assert reward([""] * 4, task=[r["task"] for r in rows]) == [0.0] * 4


def test_reward_func_from_verifier_name_and_columns():
    reward = trl_reward_func("math_answer", columns={"answer": "answer"}, rel_tol=1e-3)
    assert reward(["\\boxed{3.001}", "7"], answer=["3", "8"]) == [1.0, 0.0]
    assert reward.__name__ == "posttrain_math_answer"


def test_reward_func_without_task_column_says_so():
    with pytest.raises(KeyError, match="no 'task' column"):
        trl_reward_func()(["x"])


def test_unknown_verifier_fails_when_the_reward_function_is_built():
    from posttrain.errors import ConfigError
    from posttrain.verifiers.trl_export import trl_reward_func

    with pytest.raises(ConfigError, match="unknown verifier 'no_such_verifier'"):
        trl_reward_func("no_such_verifier")


def test_missing_verifier_argument_fails_when_built_naming_it():
    from posttrain.errors import ConfigError
    from posttrain.verifiers.trl_export import trl_reward_func

    with pytest.raises(ConfigError, match=r"missing \['answer'\]"):
        trl_reward_func("math_answer")
    assert callable(trl_reward_func("math_answer", columns={"answer": "solution"}))
