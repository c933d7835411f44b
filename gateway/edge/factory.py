"""The factory ``gateway serve`` hands to uvicorn: a worker loads its token vocabularies, then the app.

The order is about peak memory. tiktoken builds an encoding from its ranks as a Python dict (about 30 MiB
for o200k_base) beside the tokenizer's own maps (about 40 MiB, kept); the dict is freed once the tokenizer
is built. Loaded here, before the app's imports (FastAPI, Redis, the routes and their modules), that
moment comes while the worker is still small, and the app's imports then fill much of what the dict left
free. Loaded in the lifespan, after those imports, the dict came on top of everything: the worker's peak
was about 28 MiB above its size once started (see docs/how-to/kubernetes.md for the figures).

With several workers ``gateway serve`` calls the factory once, in the serving process, and forks the
workers from it (``gateway.edge.prefork``): the vocabularies, the modules and the app (its lifespan not
yet run) are then shared by all of them instead of built by each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config.loading import ConfigError, load_config
from gateway.config.settings import Settings
from gateway.edge.logs import configure_logging
from gateway.tokens.counter import TokenCounter
from gateway.tokens.vocab import VocabularyError

if TYPE_CHECKING:
    from fastapi import FastAPI


def create_app_from_env() -> FastAPI:
    """The app, with settings from the environment (GATEWAY_*)."""
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    counter = loaded_counter(settings)
    from gateway.edge.app import create_app, stop_this_process  # after the vocabularies (see above)

    app = create_app(settings, counter=counter, restart=stop_this_process, freeze_heap=True)
    if settings.http_transport == "aiohttp":  # what the lifespan's upstream clients import: now, to share
        import gateway.upstream.transport  # noqa: F401
    return app


def loaded_counter(settings: Settings) -> TokenCounter | None:
    """A token counter with the vocabularies of the config's models loaded, which the lifespan then reuses;
    None when the config or a vocabulary does not load, for the lifespan to fail on as it always has."""
    try:
        config = load_config(settings.config)
        return TokenCounter.build(config.counting, config.models)
    except (ConfigError, VocabularyError):
        return None
