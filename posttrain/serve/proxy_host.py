"""The token-capturing proxy as a service that RL on external agents starts per rollout.

    proxy = ServedProxy(engine, tok, lanes=8)   # the recipe hands the class to the rollout (recipes/pipeline.py)
    url = await proxy.start()      # uvicorn on a free loopback port; episodes open under it
    ep = proxy.episodes.open(task, state, max_calls)   # capture.py: one episode's exact ids
    await proxy.stop()

rollout/agent/external.py sits below serve/ (DESIGN.md's layering): it receives this class from the
composition root (RunContext.agent_proxy) as the `AgentProxyFactory` protocol it defines, never by importing serve.
"""

from __future__ import annotations

import asyncio
from typing import Any



class ServedProxy:
    def __init__(self, engine: Any, tok: Any, lanes: int, lane_len: int = 2048, model_name: str = "policy") -> None:
        self.engine, self.tok, self.lanes, self.lane_len, self.model_name = engine, tok, lanes, lane_len, model_name
        self.state: Any = None
        self.server: Any = None

    @property
    def episodes(self) -> Any:
        return self.state.episodes

    async def start(self) -> str:
        """Serve the engine (lanes for the episodes in flight at once; longer ones grow theirs); the base URL."""
        from posttrain.serve.app import build_app
        from posttrain.serve.capture import EpisodeRegistry
        from posttrain.serve.server import BackgroundServer
        from posttrain.serve.service import ServeState

        self.state = ServeState.create(self.engine, self.tok, self.model_name, lanes=self.lanes,
                                       lane_len=self.lane_len)
        self.state.episodes = EpisodeRegistry()
        self.server = BackgroundServer(build_app(self.state))
        return await asyncio.to_thread(self.server.start)

    async def stop(self) -> None:
        try:
            if self.server is not None:
                await asyncio.to_thread(self.server.stop)
        finally:
            if self.state is not None:
                self.state.close()
