"""The factory ``gateway serve`` hands to uvicorn: a worker loads its token vocabularies, then the app.

The order is about peak memory. tiktoken builds an encoding from its ranks as a Python dict (about 30 MiB
for o200k_base) beside the tokenizer's own maps (about 40 MiB, kept); the dict is freed once the tokenizer
is built. Loaded here, before the app's imports (FastAPI, Redis, the routes and their modules), that
moment comes while the worker is still small, and the app's imports then fill much of what the dict left
free. Loaded in the lifespan, after those imports, the dict came on top of everything: the worker's peak
was about 28 MiB above its size once started (see docs/how-to/kubernetes.md for the figures).

With several workers, ``gateway serve`` loads them once, in the serving process, and imports the app's
modules there too, before it forks the workers (``preload``): the workers then share one copy (see
``gateway.edge.prefork``).
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


_PRELOADED: list[TokenCounter] = []
"""The counter ``preload`` loaded in the serving process, which its forked workers inherit."""


def create_app_from_env() -> FastAPI:
    """The app, with settings from the environment (GATEWAY_*)."""
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    counter = _PRELOADED[0] if _PRELOADED else loaded_counter(settings)
    from gateway.edge.app import create_app, stop_this_process  # after the vocabularies (see above)

    return create_app(settings, counter=counter, restart=stop_this_process, freeze_heap=True)


def preload(settings: Settings) -> bool:
    """In the serving process, before its workers are forked: load the config's vocabularies for every
    worker's ``create_app_from_env`` to reuse (the lifespan gives the counter the worker's own config),
    then import the app's modules. False when the config or a vocabulary does not load: each worker then
    loads its own and fails as it always has."""
    counter = loaded_counter(settings)
    if counter is None:
        return False
    _PRELOADED[:] = [counter]
    import gateway.edge.app  # noqa: F401  # imported once here, shared by the workers

    return True


def loaded_counter(settings: Settings) -> TokenCounter | None:
    """A token counter with the vocabularies of the config's models loaded, which the lifespan then reuses;
    None when the config or a vocabulary does not load, for the lifespan to fail on as it always has."""
    try:
        config = load_config(settings.config)
        return TokenCounter.build(config.counting, config.models)
    except (ConfigError, VocabularyError):
        return None
