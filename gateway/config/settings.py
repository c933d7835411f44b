"""Process settings from the environment (prefix ``GATEWAY_``); each is also a ``gateway serve`` option."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_CONFIG_PATH = Path("deploy/gateway.example.yaml")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore")

    config: Path = Field(default=DEFAULT_CONFIG_PATH, description="YAML config file")
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    redis_url: str | None = Field(
        default=None, description="Redis URL; unset starts an embedded Redis server in the data directory"
    )
    redis_cluster: bool | None = Field(
        default=None,
        description=(
            "redis_url names a node of a Redis Cluster (the client finds the others): true or false forces "
            "the mode (a node of the other kind is refused), unset or `auto` asks the node (INFO cluster)"
        ),
    )
    admin_key: str | None = Field(default=None, description="key for /admin/* routes; unset disables them")
    metrics_key: str | None = Field(default=None, description="key for GET /metrics; unset leaves it open")
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["json", "console"] = "json"
    data_dir: Path = Field(default=Path(".gateway-data"), description="embedded Redis data, ledger spool")
    workers: int = Field(default=1, ge=1)
    graceful_timeout: float = Field(
        default=30.0, ge=0, description="seconds in-flight requests and streams get to finish on shutdown"
    )
    http_transport: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp", description="upstream HTTP transport under httpx (aiohttp measured faster)"
    )
    max_header_bytes: int = Field(
        default=65536, ge=1024, description="bytes a request head (request line and headers) may take"
    )
    max_headers: int = Field(default=100, ge=1, description="headers a request may have")
    header_timeout: float = Field(
        default=10.0, gt=0, description="seconds a request head may take to arrive, from its first byte"
    )
    body_timeout: float = Field(
        default=30.0, gt=0, description="seconds a request body may go without sending a byte"
    )
    keepalive_timeout: float = Field(
        default=5.0, gt=0, description="seconds an idle keep-alive connection stays open between requests"
    )
    reload_interval: float = Field(default=2.0, gt=0, description="seconds between config file checks")
    mock_upstream: bool = Field(
        default=False,
        description="start a built-in mock upstream and point the config's provider variables at it",
    )
    metrics_dir: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR", "metrics_dir"),
        description=(
            "prometheus_client's multiprocess directory, set by `gateway serve` before workers start; "
            "unset: metrics are kept in the process"
        ),
    )
    otel_sdk_disabled: bool = Field(
        default=False,
        validation_alias="OTEL_SDK_DISABLED",
        description="OpenTelemetry's switch: true keeps tracing off whatever the config says",
    )
    otel_traces_exporter: str | None = Field(
        default=None,
        validation_alias="OTEL_TRACES_EXPORTER",
        description="`none` keeps tracing off; the gateway exports only over OTLP/HTTP",
    )
    otel_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="a collector for traces: set, it turns tracing on (the SDK reads the rest of OTEL_*)",
    )

    @field_validator("redis_cluster", mode="before")
    @classmethod
    def _auto_is_unset(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "auto"):
            return None
        return value

    @model_validator(mode="after")
    def _cluster_needs_url(self) -> Settings:
        if self.redis_cluster and self.redis_url is None:
            raise ValueError("GATEWAY_REDIS_CLUSTER needs GATEWAY_REDIS_URL (a node of the cluster)")
        return self
