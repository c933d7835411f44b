"""The application: ``create_app(settings)`` builds it; its lifespan opens and closes everything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial

import anyio
import redis.asyncio as aioredis
import structlog
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway import routes
from gateway.errors import GatewayError
from gateway.logs import RequestLog, configure_logging
from gateway.pipeline import Pipeline
from gateway.redisserver import EmbeddedRedis
from gateway.reload import ConfigStore
from gateway.settings import Settings
from gateway.state import GatewayState
from gateway.upstream import ClientFactory, UpstreamPool, default_client

log = structlog.get_logger("gateway.app")


def create_app(settings: Settings, *, client_factory: ClientFactory | None = None) -> FastAPI:
    """Build the app. ``client_factory`` makes each provider's httpx client (tests pass a mock transport)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            store = ConfigStore(settings.config)
            redis_url = settings.redis_url
            if redis_url is None:
                embedded = EmbeddedRedis(settings.data_dir / "redis")
                redis_url = embedded.start()
                stack.callback(embedded.stop)  # stopped last: registered first
                log.info("embedded_redis_started", url=redis_url)
            redis = aioredis.Redis.from_url(redis_url)
            stack.push_async_callback(redis.aclose)
            pool = UpstreamPool(client_factory or partial(default_client, transport=settings.http_transport))
            stack.push_async_callback(pool.aclose)
            pipeline = Pipeline(store=store, pool=pool, observers=(RequestLog(),))
            app.state.gateway = GatewayState(
                settings=settings, store=store, pool=pool, redis=redis, pipeline=pipeline
            )
            task_group = await stack.enter_async_context(anyio.create_task_group())
            task_group.start_soon(store.watch, settings.reload_interval)
            stack.callback(task_group.cancel_scope.cancel)
            log.info("gateway_started", config=str(settings.config), models=len(store.current.routes))
            yield

    app = FastAPI(
        title="LLM cost gateway", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    add = app.router.add_route
    add("/v1/chat/completions", routes.chat_completions, methods=["POST"])
    add("/v1/embeddings", routes.embeddings, methods=["POST"])
    add("/v1/models", routes.list_models, methods=["GET"])
    add("/v1/models/{model:path}", routes.retrieve_model, methods=["GET"])
    add("/v1/{path:path}", routes.passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    add("/healthz", routes.healthz, methods=["GET"])
    add("/readyz", routes.readyz, methods=["GET"])
    app.add_exception_handler(GatewayError, routes.render_gateway_error)
    app.add_exception_handler(StarletteHTTPException, routes.render_http_error)
    app.add_exception_handler(Exception, routes.render_unexpected)
    return app


def create_app_from_env() -> FastAPI:
    """The factory ``gateway serve`` hands to uvicorn: settings from the environment (GATEWAY_*)."""
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    return create_app(settings)
