"""The RL recipe's SFT warm-up data (quickstart.demonstrations): a multi-step task is acted out, not copied."""

from __future__ import annotations

import asyncio
import types

import pytest

from posttrain.config import load_config
from posttrain.errors import ConfigError
from posttrain.recipes.quickstart import demonstrations
from posttrain.registry import build


def _model(context: int):
    return types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=context))


@pytest.fixture(scope="module")
def tok():
    from posttrain.models.tiny import build_tokenizer

    return build_tokenizer()


def test_a_multi_step_oracle_becomes_tool_calls_and_real_observations(tok):
    task = build("tools", kind="domain").generate(1, 0, 1.0)[0]
    (prompt, segments), = asyncio.run(demonstrations(load_config(None, []), _model(8192), tok, [task], None))
    texts = [tok.decode(list(ids), skip_special_tokens=False) for ids, _, _ in segments]
    trained = [t for (_, _, on), t in zip(segments, texts) if on]
    assert trained[0].startswith("<tool_call>{") and len(trained) >= 2  # calls, then the final answer
    assert not any(on for (_, _, on), t in zip(segments, texts) if t.startswith("<|tool|>"))  # observations masked
    assert not trained[0].startswith("[")  # never the plan's JSON as one reply


def test_the_demonstration_prompt_lists_the_tools_as_the_episodes_do(tok):
    task = build("tools", kind="domain").generate(1, 0, 1.0)[0]
    cfg = load_config(None, ["agent.tools_prompt=text"])
    (prompt, _), = asyncio.run(demonstrations(cfg, _model(8192), tok, [task], None))
    assert '"name": "calculator"' in tok.decode(list(prompt), skip_special_tokens=False)


def test_no_demonstration_that_fits_the_context_is_a_config_error(tok):
    task = build("tools", kind="domain").generate(1, 0, 1.0)[0]
    with pytest.raises(ConfigError, match="none of the 1 demonstration tasks"):
        asyncio.run(demonstrations(load_config(None, []), _model(16), tok, [task], None))
