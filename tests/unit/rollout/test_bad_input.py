"""Bad input gets a clear error naming it: per request, or at start-up for the tokenizer."""

from __future__ import annotations

import copy

import pytest

from posttrain.errors import ConfigError, ModelError
from posttrain.rollout.engine import GenRequest, SamplingParams
from posttrain.rollout.engines.fast.engine import FastEngine


def test_prompt_longer_than_context_fails_only_that_request(tiny):
    model, tok = tiny
    eng = FastEngine(model, tok)
    long, short = GenRequest(tuple([20] * 300), id="long"), GenRequest((20, 21, 22), id="short")
    a, b = eng.generate([long, short])
    assert a.finish_reason == "error" and "300 tokens" in a.error and "context of 256" in a.error
    assert b.finish_reason != "error" and len(b.token_ids) > 0


def test_tokenizer_without_eos_is_rejected_at_start_up(tiny):
    model, tok = tiny
    bad = copy.deepcopy(tok)
    bad.eos_token = None
    with pytest.raises(ModelError, match="EOS"):
        FastEngine(model, bad)


def test_out_of_range_sampling_params_are_rejected():
    for kw in ({"temperature": -1.0}, {"top_p": 1.5}, {"top_p": 0.0}, {"top_k": -2}, {"max_new_tokens": 0}, {"n": 0}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            SamplingParams(**kw)


def test_non_finite_temperature_is_a_per_request_error(tiny):
    model, tok = tiny
    out = FastEngine(model, tok).generate([GenRequest((20, 21), SamplingParams(temperature=float("nan")))])[0]
    assert out.finish_reason == "error" and "temperature" in out.error


def test_token_outside_vocabulary_and_empty_prompt_are_per_request_errors(tiny):
    model, tok = tiny
    a, b = FastEngine(model, tok).generate([GenRequest((20, 10_000)), GenRequest(())])
    assert "10000" in a.error and "vocabulary" in a.error
    assert b.finish_reason == "error" and "empty" in b.error


def test_bad_engine_arguments_name_the_argument(tiny):
    model, tok = tiny
    with pytest.raises(ConfigError, match="max_batch"):
        FastEngine(model, tok, max_batch=0)
    with pytest.raises(ConfigError, match="draft_model"):
        FastEngine(model, tok, speculative="draft")
