"""Malformed requests get OpenAI-style JSON errors (4xx); the server stays up, its memory flat."""

from __future__ import annotations

import json
import random
import resource

import httpx
from tests.unit.serve.conftest import memorised, served  # noqa: F401

GOOD = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
BAD_VALUES = [None, -1, 0, 1e309, "x", [], {}, [1, "a"], True, "9" * 400, {"a": [{}]}, -2**70, 3.5]


def _mutations(rng: random.Random, n: int) -> list[bytes]:
    out = [b"", b"{", b"[]", b"null", b"\xff\xfe", b'"str"', b"[" * 5000 + b"]" * 5000, b'{"model": "tiny"}',
           json.dumps({**GOOD, "model": "nope"}).encode(), json.dumps({**GOOD, "messages": []}).encode(),
           json.dumps({**GOOD, "messages": [{"role": "wizard", "content": "x"}]}).encode(),
           json.dumps({**GOOD, "messages": [{"role": "user", "content": "x" * 5000}]}).encode()]
    fields = ["model", "messages", "temperature", "top_p", "n", "max_tokens", "stop", "seed", "logprobs",
              "top_logprobs", "tools", "tool_choice", "stream", "prompt"]
    while len(out) < n:
        body = dict(GOOD)
        for f in rng.sample(fields, rng.randint(1, 3)):
            body[f] = rng.choice(BAD_VALUES)
        raw = json.dumps(body).encode()
        if rng.random() < 0.2:  # byte-level damage
            i = rng.randrange(len(raw))
            raw = raw[:i] + bytes([rng.randrange(256)]) + raw[i + 1:]
        out.append(raw)
    return out


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


ROUTES = ["/v1/chat/completions", "/v1/completions"]


def test_fuzzed_bodies_get_json_4xx_and_the_server_stays_up(served):
    url, state = served
    rng = random.Random(0)
    with httpx.Client(base_url=url, timeout=60) as http:
        for i, raw in enumerate(_mutations(rng, 40)):  # warm-up: allocator pools, caches
            http.post(ROUTES[i % 2], content=raw)
        before = _rss_mb()
        statuses = []
        for i, raw in enumerate(_mutations(rng, 300)):
            route = ROUTES[i % 2]
            r = http.post(route, content=raw, headers={"content-type": "application/json"})
            if r.status_code >= 400:
                err = r.json()["error"]
                assert set(err) == {"message", "type", "param", "code"} and err["message"], raw[:80]
                assert 400 <= r.status_code < 500, (r.status_code, err, raw[:80])
            statuses.append(r.status_code)
        grown = _rss_mb() - before
        assert http.get("/health").json()["status"] == "ok"
        ok = http.post("/v1/chat/completions", json=GOOD)
        assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["role"] == "assistant"
    assert sum(s >= 400 for s in statuses) > 200
    assert grown < 40, f"RSS grew {grown:.1f} MB over 300 malformed requests"


def test_unknown_route_and_wrong_method_are_json_errors(served):
    with httpx.Client(base_url=served[0]) as http:
        r = http.get("/v1/nothing")
        assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
        assert http.get("/v1/chat/completions").status_code == 405


def test_api_key_is_required_when_set(memorised):
    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.serve.app import build_app
    from posttrain.serve.server import BackgroundServer
    from posttrain.serve.service import ServeState

    model, tok = memorised
    state = ServeState.create(FastEngine(model, tok, max_batch=2), tok, "tiny", api_key="sekret")
    try:
        with BackgroundServer(build_app(state)) as url, httpx.Client(base_url=url) as http:
            assert http.get("/v1/models").status_code == 401
            assert http.get("/v1/models", headers={"authorization": "Bearer wrong"}).json()["error"]["code"] \
                == "invalid_api_key"
            assert http.get("/v1/models", headers={"authorization": "Bearer sekret"}).status_code == 200
            assert http.get("/health").status_code == 200
    finally:
        state.close()


def test_metrics_are_prometheus_text(served):
    with httpx.Client(base_url=served[0], timeout=60) as http:
        http.post("/v1/chat/completions", json=GOOD)
        text = http.get("/metrics").text
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    for want in ("posttrain_queue_depth", "posttrain_output_tokens_per_second", "posttrain_prefix_cache_hit_rate",
                 "posttrain_speculative_acceptance", "posttrain_time_to_first_token_seconds"):
        assert want in names
    assert all(line.startswith("#") or len(line.rsplit(" ", 1)) == 2 for line in text.splitlines())
