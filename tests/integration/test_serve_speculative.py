"""Speculative decoding as a `posttrain serve` option: n-gram and a draft model, and its metric."""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest
from posttrain.testing.cli_fork import run_cli

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "ab ab ab ab ab ab ab ab"  # the tiny model (seed 0) answers it greedily with a run of "b": easy to speculate


def _acceptance(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=60).text
    [line] = [x for x in text.splitlines() if x.startswith("posttrain_speculative_acceptance ")]
    return float(line.split()[1])


@pytest.fixture(scope="module")
def plain():
    from posttrain.serve.server import load_engine

    eng, tok, _ = load_engine("tiny", max_batch=2, max_len=256)
    return eng, tok


@pytest.mark.parametrize("speculative,draft", [("ngram", None), ("draft", "tiny")])
def test_a_speculative_server_reports_acceptance_and_keeps_greedy_output(plain, speculative, draft):
    from posttrain.rollout.engine import GenRequest, SamplingParams
    from posttrain.serve.app import build_app
    from posttrain.serve.server import BackgroundServer, load_engine
    from posttrain.serve.service import ServeState

    eng, tok, name = load_engine("tiny", max_batch=2, max_len=256, speculative=speculative, draft_model=draft)
    assert type(eng.spec).__name__ == {"ngram": "NgramSpeculator", "draft": "DraftSpeculator"}[speculative]
    state = ServeState.create(eng, tok, name)
    try:
        with BackgroundServer(build_app(state)) as url:
            assert _acceptance(url) == 0.0  # nothing proposed yet
            client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)
            got = client.completions.create(model="tiny", prompt=PROMPT, temperature=0, max_tokens=48).choices[0].text
            assert _acceptance(url) > 0.0
    finally:
        state.close()
    ref, _ = plain
    prompt = tuple(tok(PROMPT, add_special_tokens=False)["input_ids"])
    want = ref.generate([GenRequest(prompt, SamplingParams(temperature=0.0, max_new_tokens=48))])[0]
    assert got == tok.decode(want.token_ids, skip_special_tokens=False)  # speculation never changes greedy output


def test_speculative_options_are_checked_before_loading():
    from posttrain.errors import ConfigError
    from posttrain.serve.server import check_speculative

    check_speculative(None, None)
    check_speculative("ngram", None)
    check_speculative("draft", "models/small")
    for spec, draft, msg in [("draft", None, "--draft-model"), ("ngram", "x", "--speculative draft"),
                             (None, "x", "--speculative draft"), ("medusa", None, "ngram, draft")]:
        with pytest.raises(ConfigError, match=msg):
            check_speculative(spec, draft)
    r = run_cli(["serve", "tiny", "--speculative", "draft"],
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert r.stderr.startswith("posttrain: error: --speculative draft needs --draft-model")
