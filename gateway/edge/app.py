"""The application: ``create_app(settings)`` builds it; its lifespan opens and closes everything."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import structlog
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from gateway.analysis import routes as analysis_routes
from gateway.base.errors import GatewayError
from gateway.config.schema.sampling import SamplingConfig
from gateway.config.settings import Settings
from gateway.edge import dashboard, messages_routes, responses_routes, routes
from gateway.edge.admin import admin_config_router
from gateway.edge.heap import freeze_started_heap
from gateway.edge.hot import HotRoutes
from gateway.edge.keys_admin import admin_keys_router
from gateway.edge.lifespan import open_gateway
from gateway.edge.metrics_route import scrape as scrape_metrics
from gateway.edge.paths import PathGuard
from gateway.experiments.report import routes as experiments_routes
from gateway.ledger import routes as ledger_routes
from gateway.ledger.source import LedgerSource
from gateway.sampling.report import routes as sampling_routes
from gateway.tokens.counter import TokenCounter
from gateway.upstream.clients import ClientFactory

log = structlog.get_logger("gateway.app")


class GatewayApp(FastAPI):
    """The app; the model APIs' POST routes are served straight from the server (``gateway.edge.hot``)."""

    hot: HotRoutes | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        hot = self.hot
        if hot is not None and scope["type"] == "http":
            endpoint = hot.endpoint(scope)
            if endpoint is not None:
                scope["app"] = self
                await hot.serve(endpoint, scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(
    settings: Settings,
    *,
    client_factory: ClientFactory | None = None,
    counter: TokenCounter | None = None,
    restart: Callable[[], None] | None = None,
    freeze_heap: bool = False,
) -> FastAPI:
    """Build the app. ``client_factory`` makes each provider's httpx client (tests pass a mock transport);
    ``counter`` lends already loaded vocabularies (tests share one); ``restart`` stops the process for its
    supervisor to start again, when the Redis client opened at start proves of the wrong kind for the node
    (``gateway.redis.mode``); ``freeze_heap``: once started, what starting made is frozen out of the garbage
    collector's sight (``gateway.edge.heap``; a server's worker only)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            state = await open_gateway(
                stack, settings, client_factory=client_factory, counter=counter, restart=restart
            )
            app.state.gateway = state
            task_group = await stack.enter_async_context(anyio.create_task_group())
            task_group.start_soon(state.store.watch, settings.reload_interval)
            task_group.start_soon(state.responses.settler.run)
            task_group.start_soon(state.mode.run)
            task_group.start_soon(state.alerts.run)  # idle (no Redis, no network) without alerts.webhook_url
            stack.callback(task_group.cancel_scope.cancel)
            frozen = freeze_started_heap() if freeze_heap else 0
            log.info(
                "gateway_started",
                config=str(settings.config),
                models=len(state.store.current.routes),
                frozen_objects=frozen,
            )
            yield

    app = GatewayApp(
        title="LLM cost gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    mount_routes(app)
    app.add_middleware(PathGuard)
    app.add_exception_handler(GatewayError, routes.render_gateway_error)
    app.add_exception_handler(StarletteHTTPException, routes.render_http_error)
    app.add_exception_handler(Exception, routes.render_unexpected)
    app.hot = HotRoutes(HOT_ROUTES, app.exception_handlers)
    return app


HOT_ROUTES = {
    "/v1/chat/completions": routes.chat_completions,
    "/v1/responses": responses_routes.create,
    "/v1/messages": messages_routes.create,
    "/v1/embeddings": routes.embeddings,
}
"""The routes ``GatewayApp`` serves straight from the server; ``mount_routes`` mounts them too (for the
requests that take the whole way, e.g. a path with a trailing slash)."""


def _reader(request: Request) -> LedgerSource:
    return routes.state_of(request).reader


def _sampling(request: Request) -> SamplingConfig:
    return routes.state_of(request).store.current.config.sampling


def mount_routes(app: FastAPI) -> None:
    """The hot path on plain Starlette routes (no dependency solving); admin and finance on routers."""
    add = app.router.add_route
    for path, endpoint in HOT_ROUTES.items():
        add(path, endpoint, methods=["POST"])
    app.router.add_websocket_route("/v1/responses", responses_routes.refuse_websocket)
    add("/v1/responses/compact", responses_routes.compact, methods=["POST"])
    add("/v1/responses/input_tokens", responses_routes.input_tokens, methods=["POST"])
    add("/v1/responses/{response_id}", responses_routes.by_id, methods=["GET", "DELETE"])
    add("/v1/responses/{response_id}/{action}", responses_routes.by_id, methods=["GET", "POST"])
    add("/v1/messages/count_tokens", messages_routes.count_tokens, methods=["POST"])
    add("/api/event_logging/batch", messages_routes.event_logging, methods=["POST"])
    add("/v1/models", messages_routes.models, methods=["GET"])  # Anthropic's list to Anthropic clients
    add("/v1/models/{model:path}", messages_routes.model, methods=["GET"])
    add("/", routes.root, methods=["GET"])  # HEAD too: Starlette answers it for every GET route
    add("/healthz", routes.healthz, methods=["GET"])
    add("/readyz", routes.readyz, methods=["GET"])
    add("/metrics", scrape_metrics, methods=["GET"])
    app.include_router(admin_config_router())
    app.include_router(admin_keys_router())
    app.include_router(dashboard.router())
    app.include_router(
        ledger_routes.admin_router(
            require_admin=routes.require_admin, get_reader=_reader, tenant_names=routes.tenant_names
        )
    )
    app.include_router(ledger_routes.tenant_router(get_tenant=routes.calling_tenant, get_reader=_reader))
    app.include_router(
        sampling_routes.admin_router(
            require_admin=routes.require_admin, get_redis=routes.redis_of, get_config=_sampling
        )
    )
    app.include_router(
        experiments_routes.admin_router(
            require_admin=routes.require_admin,
            get_redis=routes.redis_of,
            get_config=lambda request: routes.state_of(request).store.current.config,
        )
    )
    app.include_router(
        analysis_routes.admin_router(
            require_admin=routes.require_admin,
            get_reader=_reader,
            get_config=lambda request: routes.state_of(request).store.current.config,
            get_engine=lambda request: routes.state_of(request).store.current.engine,
        )
    )
    # last: any other /v1/* path, forwarded only when the config's passthrough list names it
    add("/v1/{path:path}", routes.passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])


def stop_this_process() -> None:
    """SIGTERM to this process: uvicorn shuts it down gracefully (the ledger drains, else spools), and its
    supervisor (uvicorn's for a worker; Kubernetes, compose or systemd for the server) starts it again."""
    os.kill(os.getpid(), signal.SIGTERM)
