"""`rl.max_prompt_tokens`: training tasks with longer chat-templated prompts are left out of RL
and named; the held-out split keeps every task (verl's filter_overlong_prompts)."""

import pytest

from posttrain.config import load_config
from posttrain.errors import ConfigError
from posttrain.models.tiny import build_tokenizer
from posttrain.rollout.prompting import encode_prompt
from posttrain.recipes.quickstart import drop_long_prompts
from posttrain.tasks.splits import make_splits

TOK = build_tokenizer()


def splits(limit_share: float = 0.5):
    cfg = load_config(None, ["tasks.domains.code.n_train=40", "tasks.domains.code.n_eval=20",
                             "tasks.domains.arithmetic.n_train=40", "tasks.domains.arithmetic.n_eval=20"])
    s = make_splits(cfg)
    sizes = sorted(len(encode_prompt(TOK, t.prompt)) for t in s.train)
    return s, sizes[int(limit_share * (len(sizes) - 1))]


def test_training_tasks_over_the_limit_are_left_out_and_named():
    s, limit = splits()
    out = drop_long_prompts(s, TOK, limit)
    assert out.dropped and all(n > limit for n in out.dropped.values())
    assert all(len(encode_prompt(TOK, t.prompt)) <= limit for t in out.train)
    assert len(out.train) + len(out.dropped) == len(s.train)


def test_the_held_out_split_keeps_every_task():
    s, limit = splits()
    assert drop_long_prompts(s, TOK, limit).held_out == s.held_out


def test_zero_means_no_limit():
    s, _ = splits()
    assert drop_long_prompts(s, TOK, 0) is s


def test_a_limit_that_leaves_no_training_task_is_refused_naming_the_setting():
    s, _ = splits()
    with pytest.raises(ConfigError, match="rl.max_prompt_tokens=1 leaves no training task"):
        drop_long_prompts(s, TOK, 1)
