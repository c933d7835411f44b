"""The config a replay decides and prices with: parsed and checked like the gateway's own, except that an
environment variable it names and the environment does not hold reads as a placeholder (replay needs no
key or secret; a candidate written for production must still load on an ops laptop)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from gateway.config.loading import ConfigError, parse_config
from gateway.config.runtime import build_engine
from gateway.config.schema.root import GatewayConfig
from policies import PolicyConfigError, PolicyEngine


class Placeholders(Mapping[str, str]):
    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def __getitem__(self, name: str) -> str:
        return self._env.get(name, f"unset-{name}")

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    config: GatewayConfig
    engine: PolicyEngine


def parse_candidate(text: str, path: Path, env: Mapping[str, str]) -> Candidate:
    """Raises ``ValueError`` with every problem, by file and line."""
    try:
        config = parse_config(text, path, Placeholders(env))
        engine = build_engine(config)
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    except PolicyConfigError as exc:
        raise ValueError(f"{path}: policies: {exc}") from exc
    return Candidate(str(path), config, engine)
