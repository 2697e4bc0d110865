"""The proxy's model-call route, served ahead of FastAPI (app.ServeApp): the same answers, errors and counters."""

from __future__ import annotations

import json
import random

import httpx
import pytest

from tests.integration.test_serve_errors import _mutations

GOOD = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0}


@pytest.fixture(scope="module")
def proxy():
    """(base url, ServeState, open(max_calls) -> episode) of a live server with the proxy on."""
    from posttrain.models.tiny import build_tiny
    from posttrain.rollout.engines.fast.engine import FastEngine
    from posttrain.serve.app import build_app
    from posttrain.serve.capture import EpisodeRegistry
    from posttrain.serve.server import BackgroundServer
    from posttrain.serve.service import ServeState

    model, tok = build_tiny(seed=0)
    state = ServeState.create(FastEngine(model.eval(), tok, max_batch=4), tok, "tiny")
    state.episodes = EpisodeRegistry()
    with BackgroundServer(build_app(state)) as url:
        yield url, state, lambda max_calls=100: state.episodes.open(None, {}, max_calls)
    state.close()


def _chat(ep) -> str:
    return f"/episodes/{ep.id}/v1/chat/completions"


def test_calls_chain_and_are_recorded(proxy):
    url, state, open_ep = proxy
    ep = open_ep()
    with httpx.Client(base_url=url, timeout=60) as http:
        r = http.post(_chat(ep), json=GOOD)
        assert r.status_code == 200 and r.headers["x-posttrain-weights-version"] == "0"
        reply = r.json()["choices"][0]["message"]
        msgs = GOOD["messages"] + [reply, {"role": "tool", "content": "out"}]
        r2 = http.post(_chat(ep), json={**GOOD, "messages": msgs})
        assert r2.status_code == 200 and r2.json()["id"] != r.json()["id"]
    first, second = ep.calls
    assert second.reused_tokens == len(first.prompt_ids) + len(first.completion_ids) and not second.rerendered
    assert second.prompt_ids[:second.reused_tokens] == first.prompt_ids + first.completion_ids
    assert first.message == reply and first.wall_s > 0


def test_a_streamed_call_is_served_and_recorded(proxy):
    url, _, open_ep = proxy
    ep = open_ep()
    with httpx.Client(base_url=url, timeout=60) as http:
        r = http.post(_chat(ep), json={**GOOD, "stream": True})
    lines = [x for x in r.text.split("\n\n") if x]
    assert r.status_code == 200 and lines[-1] == "data: [DONE]"
    text = "".join(json.loads(x[6:])["choices"][0]["delta"].get("content") or "" for x in lines[:-1])
    assert len(ep.calls) == 1 and text == ep.calls[0].message["content"]


def test_malformed_bodies_get_json_4xx_counted_and_the_server_stays_up(proxy):
    url, state, open_ep = proxy
    ep = open_ep(max_calls=10**6)
    before = dict(state.counters)
    statuses = []
    with httpx.Client(base_url=url, timeout=60) as http:
        for raw in _mutations(random.Random(2), 150):
            r = http.post(_chat(ep), content=raw, headers={"content-type": "application/json"})
            if r.status_code >= 400:
                err = r.json()["error"]
                assert set(err) == {"message", "type", "param", "code"} and err["message"], raw[:80]
                assert 400 <= r.status_code < 500, (r.status_code, err, raw[:80])
            statuses.append(r.status_code)
        assert http.post(_chat(ep), json=GOOD).status_code == 200
    assert sum(s >= 400 for s in statuses) > 100
    assert state.counters["requests"] - before["requests"] == len(statuses) + 1
    assert state.counters["errors_4xx"] - before["errors_4xx"] == sum(s >= 400 for s in statuses)


def test_route_errors_are_openais(proxy, monkeypatch):
    url, state, open_ep = proxy
    ep = open_ep(max_calls=1)
    with httpx.Client(base_url=url, timeout=60) as http:
        r = http.post("/episodes/nope/v1/chat/completions", json=GOOD)
        assert r.status_code == 404 and r.json()["error"]["code"] == "episode_not_found"
        r = http.post(_chat(ep), json={**GOOD, "model": "other"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        r = http.post(_chat(ep), json={**GOOD, "n": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "n"
        assert http.post(_chat(ep), json=GOOD).status_code == 200
        r = http.post(_chat(ep), json=GOOD)
        assert r.status_code == 429 and r.json()["error"]["code"] == "step_budget" and ep.budget_hit
        assert http.get(_chat(ep)).status_code == 405  # not a POST: FastAPI's routing, as before
        monkeypatch.setattr("posttrain.serve.protocol.MAX_BODY", 1000)
        big = json.dumps({**GOOD, "messages": [{"role": "user", "content": "x" * 2000}]}).encode()
        assert http.post(_chat(ep), content=big).status_code == 413  # declared length
        r = http.post(_chat(ep), content=iter([big[:600], big[600:]]))  # chunked: counted as it arrives
        assert r.status_code == 413 and r.json()["error"]["type"] == "invalid_request_error"
        monkeypatch.setattr(state, "api_key", "sekret")
        r = http.post(_chat(ep), json=GOOD)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_fastapis_route_serves_the_same_call_where_the_fast_path_steps_aside(proxy):
    """Under a root path the request goes through FastAPI's routing, to the same handler."""
    import asyncio

    url, state, open_ep = proxy
    ep = open_ep()
    from posttrain.serve.app import build_app

    app = build_app(state)

    async def main():
        transport = httpx.ASGITransport(app=app, root_path="/r")
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as http:
            return await http.post(f"/r{_chat(ep)}", json=GOOD)

    r = asyncio.run(main())
    assert r.status_code == 200 and len(ep.calls) == 1 and ep.calls[0].message == r.json()["choices"][0]["message"]
