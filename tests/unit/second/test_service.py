"""Models as services inside a run (posttrain/models/service.py): local, over HTTP, and failing."""

from __future__ import annotations

import asyncio

import pytest

from posttrain.config import RunConfig
from posttrain.config_schema import SecondModelConfig
from posttrain.models.service import ServicePool, active_service, open_service

CONVS = [[{"role": "user", "content": f"count to {i}"}] for i in range(6)]


def test_local_tiny_answers_every_conversation_in_shared_batches():
    svc = open_service("judge", SecondModelConfig(path="tiny", max_new_tokens=4, batch=8))
    replies = asyncio.run(svc.chat(CONVS))
    assert [r.ok for r in replies] == [True] * 6
    assert svc.stats.calls == 1  # one backend call for the six


def test_active_time_counts_overlapping_calls_once():
    from posttrain.models.service import ModelService

    class Slow:  # a backend that takes 0.3 s a batch, batches overlapping
        model_id = "slow"

        async def chat_batch(self, convs, params):
            await asyncio.sleep(0.3)
            return ["ok"] * len(convs)

    svc = ModelService("user", Slow(), SecondModelConfig(path="tiny", batch=1, concurrency=4))
    asyncio.run(svc.chat(CONVS[:4]))  # four one-conversation batches at once
    assert svc.stats.calls == 4 and svc.stats.busy_s >= 4 * 0.3
    assert 0.3 <= svc.stats.active_s < 0.5 * svc.stats.busy_s  # the union of the spans, not their sum


def test_posttrain_serve_subprocess_through_the_openai_client(serve_tiny):
    svc = open_service("user", SecondModelConfig(url=serve_tiny, model="tiny", max_new_tokens=4))
    replies = asyncio.run(svc.chat(CONVS[:3]))
    assert all(r.ok and r.attempts == 1 for r in replies), replies


def test_a_failing_server_is_an_error_reply_after_the_retries(failing_server):
    svc = open_service("judge", SecondModelConfig(url=failing_server, retries=2, backoff_s=0.0))
    replies = asyncio.run(svc.chat(CONVS[:2]))
    assert [(r.ok, r.attempts) for r in replies] == [(False, 3), (False, 3)]
    assert "503" in replies[0].error or "overloaded" in replies[0].error


def test_a_refused_connection_is_an_error_reply_not_an_exception():
    svc = open_service("judge", SecondModelConfig(url="http://127.0.0.1:9/v1", retries=1, backoff_s=0.0))
    (reply,) = asyncio.run(svc.chat(CONVS[:1]))
    assert not reply.ok and reply.error


def test_a_timeout_is_an_error_reply(serve_tiny):
    svc = open_service("judge", SecondModelConfig(url=serve_tiny, model="tiny", timeout_s=1e-4, retries=0))
    (reply,) = asyncio.run(svc.chat(CONVS[:1]))
    assert not reply.ok and "timed out" in reply.error


def test_a_run_config_names_its_models_and_the_pool_opens_them_by_name():
    cfg = RunConfig.model_validate({"models": {"judge": {"path": "tiny"}}})
    with ServicePool(cfg.models):
        assert active_service("judge").model_id == "tiny"


def test_a_model_entry_needs_exactly_one_of_path_or_url():
    with pytest.raises(ValueError, match="exactly one of path"):
        SecondModelConfig(path="tiny", url="http://127.0.0.1:1/v1")
