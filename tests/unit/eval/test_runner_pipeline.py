"""The suite runner's pipeline through the rollout entry: batch i+1 generates while batch i is
verified, and a batch whose generation fails is recorded, not raised."""

import asyncio
import threading

from tests.unit.agent.conftest import ScriptedEngine, tok  # noqa: F401  (tok: the fixture)

from posttrain.eval.records import RecordFile
from posttrain.eval.runner import _Job, _pipeline, _Run
from posttrain.tasks import generate_domain
from posttrain.verifiers.run import VerifierRunner

TASKS = generate_domain("arithmetic", 4, 0)
SAMPLING = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 8}


class CountingEngine(ScriptedEngine):
    """Sets `second` when its second generate call starts."""

    def __init__(self, tok) -> None:
        super().__init__(tok, lambda text: "7")
        self.second, self.n = threading.Event(), 0

    def generate(self, requests):
        self.n += 1
        if self.n == 2:
            self.second.set()
        return super().generate(requests)


class WaitingVerifier(VerifierRunner):
    """Verifies a batch only once the engine has started the next one (or 20 s have passed)."""

    def __init__(self, engine: CountingEngine) -> None:
        super().__init__(None)
        self.engine, self.overlapped = engine, []

    async def verify_all(self, tasks_by_id, trajs):
        self.overlapped.append(await asyncio.to_thread(self.engine.second.wait, 20))
        return await super().verify_all(tasks_by_id, trajs)


def pipeline(tmp_path, engine, verifier, tok):
    jobs = [_Job(t, 0, 1, f"key-{t.id}") for t in TASKS]
    run = _Run(engine, tok, verifier, RecordFile(tmp_path / "samples.jsonl"), None, SAMPLING, len(jobs), None)
    asyncio.run(_pipeline(run, jobs, {}, batch=2, first=2))
    return RecordFile(tmp_path / "samples.jsonl").load()


def test_the_next_batch_generates_while_this_one_is_verified(tmp_path, tok):
    engine = CountingEngine(tok)
    verifier = WaitingVerifier(engine)
    recs = pipeline(tmp_path, engine, verifier, tok)
    assert engine.n == 2 and verifier.overlapped[0] is True
    assert len(recs) == 4 and all(r.status == "ok" for r in recs.values())


def test_a_batch_whose_generation_fails_is_recorded_as_infra_errors(tmp_path, tok):
    class Broken(ScriptedEngine):
        def generate(self, requests):
            raise RuntimeError("device lost")

    recs = pipeline(tmp_path, Broken(tok, lambda text: ""), VerifierRunner(None), tok)
    assert len(recs) == 4 and all(r.infra_error and "device lost" in r.reason for r in recs.values())
