"""In-flight weight updates on the Ray rollout workers (rl.partial_rollouts).

    eng.set_weight_source(newest)   # the async pipeline's: () -> (version, state) | None
    eng.generate(requests)          # while it runs, newer weights are offered to the workers

While `RemoteEngine.generate` waits on the workers, a driver thread polls the source every
`poll_s`. A version newer than the last one offered is digested (weight_sync.manifest), put
into the object store once, and offered to every alive worker (`offer_weights`, a method
in its own concurrency group, so it runs beside the worker's `generate`). Each worker's
`fast` engine installs the newest offer at its next decode step, verified against the
digests, and tags the later tokens with that version, as the local engine does. An offer
a worker did not reach before its batch ended is taken at the start of its next batch
(the pipeline never starts a batch below the versions it offered), or dropped by the
version check when older weights than the engine's arrive.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

log = logging.getLogger(__name__)
Source = Callable[[], "tuple[int, Mapping[str, Any]] | None"]


class WeightOffers:
    def __init__(self, eng: Any, source: Source, poll_s: float = 0.02) -> None:
        self.eng, self.source, self.poll_s = eng, source, poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="weight-offers", daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> "WeightOffers":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None and exc[0] is None:
            raise self.error

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.offer_newest()
            except BaseException as e:  # noqa: BLE001 - raised on the caller's thread at exit
                self.error = e
                return
            self._stop.wait(self.poll_s)

    def offer_newest(self) -> int | None:
        """Offer the source's version if it is newer than the last offered; returns it."""
        import ray
        import torch

        from posttrain.rollout.weight_sync import manifest

        got = self.source()
        if got is None or got[0] <= self.eng.offered_version:
            return None
        version, state = got[0], got[1]
        cpu = {k: v.detach().to("cpu") for k, v in state.items()}
        man = manifest(cpu, version, getattr(torch, self.eng.dtype) if self.eng.dtype else None)
        ref = ray.put(cpu)
        for w in self.eng._alive():
            w.handle.offer_weights.remote(ref, version, man)
        self.eng.offered_version = version
        self.eng._latest = (ref, version, man)  # a worker refreshed later gets these weights
        self.eng.weights_version = max(self.eng.weights_version, version)  # "the newest pushed"
        log.info("weight offer v%d to %d worker(s) mid-batch", version, len(self.eng._alive()))
        return version
