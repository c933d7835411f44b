"""Hot reload: the config file is polled; a valid change swaps the runtime atomically, an invalid one is
logged with file and line and the last good config stays in force."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import structlog

from gateway.configfile import ConfigError, load_config
from gateway.runtime import Runtime, build_runtime
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

    def __init__(
        self,
        path: Path,
        *,
        on_change: Callable[[Runtime], None] | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        """``counter``: a token counter whose loaded vocabularies to reuse (they take a second to load)."""
        self.path = path
        self._on_change = on_change
        self._stamp = stamp(path)
        self.current: Runtime = build_runtime(load_config(path), counter=counter)
        self.reload_failures = 0
        self.reloads = 0
        self.last_error: str | None = None

    def reload(self) -> Runtime:
        """Load the file again; raise ConfigError (keeping the current runtime) when it is invalid."""
        self._stamp = stamp(self.path)
        try:
            runtime = build_runtime(load_config(self.path), counter=self.current.counter)
        except ConfigError as exc:
            self.reload_failures += 1
            self.last_error = str(exc)
            log.error("config_reload_rejected", path=str(self.path), problems=exc.problems)
            raise
        self.current = runtime
        self.reloads += 1
        self.last_error = None
        if self._on_change is not None:
            self._on_change(runtime)
        log.info("config_reloaded", path=str(self.path), models=len(runtime.routes))
        return runtime

    def changed(self) -> bool:
        return stamp(self.path) != self._stamp

    async def watch(self, interval: float) -> None:
        """Poll the file every ``interval`` seconds until cancelled."""
        while True:
            await anyio.sleep(interval)
            if self.changed():
                try:
                    self.reload()
                except ConfigError:
                    pass  # logged and counted in reload(); the last good config stays in force
