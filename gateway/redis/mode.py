"""Checking the server's Redis mode later, when the node did not answer at start.

The server then started with the forced mode (``GATEWAY_REDIS_CLUSTER``), else with a plain client, and
asks the node again every few seconds until it answers. A node of the kind of the client ends the check.
A node of the other kind leaves ``/readyz`` failing with the reason, logged as an error; when the mode was
only assumed, the process is also stopped (``restart``) so that its supervisor (uvicorn's for workers,
Kubernetes or compose for the pod) starts it again, and the new start asks the node and opens the right
client. A forced mode the node contradicts is left to the operator: a new start would refuse it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog
from redis.exceptions import ResponseError

from gateway.redis.connect import UNREACHABLE, RedisMode, mismatch, node_is_cluster, where

ASK_EVERY_SECONDS = 2.0

log = structlog.get_logger("gateway.redis")


class ModeWatch:
    """``problem`` is None once the client is known to fit the node; ``run`` asks until it is known."""

    def __init__(
        self,
        url: str,
        mode: RedisMode,
        *,
        restart: Callable[[], None] | None = None,
        every: float = ASK_EVERY_SECONDS,
    ) -> None:
        self._url = url
        self._mode = mode
        self._restart = restart
        self._every = every
        self.problem: str | None = None
        if not mode.verified:
            how = "as GATEWAY_REDIS_CLUSTER says" if mode.forced else "assumed until it answers"
            kind = _kind(mode.cluster)
            self.problem = f"unverified: Redis did not answer at start; a {kind} client is open ({how})"

    def check(self) -> str:
        return self.problem or "ok"

    async def run(self) -> None:
        while self.problem is not None and self.problem.startswith("unverified"):
            await asyncio.sleep(self._every)
            try:
                node = await node_is_cluster(self._url)
            except UNREACHABLE:
                continue
            except ResponseError:  # INFO refused: the mode was forced (else the start had refused)
                node = self._mode.cluster
            self._settle(node)

    def _settle(self, node: bool) -> None:
        if node == self._mode.cluster:
            self.problem = None
            log.info("redis_mode_verified", cluster=node)
            return
        if self._mode.forced:
            self.problem = mismatch(self._mode.cluster, where=where(self._url))
            log.error("redis_mode_wrong", reason=self.problem)
            return
        self.problem = (
            f"the Redis at {where(self._url)} is a {_kind(node)} node, but it did not answer at start and a "
            f"{_kind(self._mode.cluster)} client was opened; this process stops so that a new start "
            "opens the right one (set GATEWAY_REDIS_CLUSTER to avoid the guess)"
        )
        log.error("redis_mode_wrong", reason=self.problem, restarting=self._restart is not None)
        if self._restart is not None:
            self._restart()


def _kind(cluster: bool) -> str:
    return "cluster" if cluster else "standalone"
