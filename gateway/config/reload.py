"""Hot reload: the config file is polled; a valid change swaps the runtime atomically, an invalid one is
logged with file and line and the last good config stays in force."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog

from gateway.config.loading import ConfigError, load_config
from gateway.config.runtime import Runtime, build_runtime
from gateway.config.startup import warnings_of
from gateway.tokens.counter import TokenCounter

log = structlog.get_logger("gateway.config")


@dataclass(frozen=True, slots=True)
class FileStamp:
    mtime_ns: int
    size: int
    inode: int


def stamp(path: Path) -> FileStamp | None:
    try:
        # stat() follows symlinks, so a Kubernetes ConfigMap's swapped ..data link counts as a change.
        st = os.stat(path)
    except OSError:
        return None
    return FileStamp(st.st_mtime_ns, st.st_size, st.st_ino)


class ConfigStore:
    """Holds the current Runtime; ``reload()`` validates the file again and swaps it in when valid."""

    def __init__(self, path: Path, *, counter: TokenCounter | None = None) -> None:
        """``counter``: a token counter whose loaded vocabularies to reuse (they take a second to load)."""
        self.path = path
        self._stamp = stamp(path)
        self.current: Runtime = build_runtime(load_config(path), counter=counter)
        self.reload_failures = 0
        self.reloads = 0
        self.last_error: str | None = None

    def reload(self) -> Runtime:
        """Load the file again; raise ConfigError (keeping the current runtime) when it is invalid, changes
        what applies only on restart, or cannot be built into a runtime."""
        self._stamp = stamp(self.path)
        try:
            runtime = self._next_runtime()
        except ConfigError as exc:
            self._rejected(str(exc))
            log.error("config_reload_rejected", path=str(self.path), problems=exc.problems)
            raise
        self.current = runtime
        self.reloads += 1
        self.last_error = None
        log.info("config_reloaded", path=str(self.path), models=len(runtime.routes))
        for notice in warnings_of(runtime.config, self.path):
            log.warning(notice.event, path=str(self.path), **notice.fields)
        return runtime

    def _next_runtime(self) -> Runtime:
        config = load_config(self.path)
        if config.ledger != self.current.config.ledger:
            raise ConfigError(
                self.path,
                [
                    f"{self.path}: ledger: the ledger section changes only on restart; restart the gateway "
                    "to apply it, or put the running ledger section back"
                ],
            )
        try:
            return build_runtime(config, counter=self.current.counter)
        except Exception as exc:  # a config that validates must never take the watcher down with it
            raise ConfigError(self.path, [f"{self.path}: {type(exc).__name__}: {exc}"]) from exc

    def _rejected(self, error: str) -> None:
        self.reload_failures += 1
        self.last_error = error

    def changed(self) -> bool:
        return stamp(self.path) != self._stamp

    async def watch(self, interval: float) -> None:
        """Poll the file every ``interval`` seconds until cancelled; no error ends the watching."""
        while True:
            await anyio.sleep(interval)
            try:
                if self.changed():
                    self.reload()
            except ConfigError:
                pass  # logged and counted in reload(); the last good config stays in force
            except Exception as exc:
                self._rejected(f"{self.path}: {type(exc).__name__}: {exc}")
                log.exception("config_watch_failed", path=str(self.path))
