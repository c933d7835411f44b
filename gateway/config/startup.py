"""What the gateway will call and who can reach it, said once at start (and by ``check-config``).

Each provider's base URL and whether its API key is set; a warning for every tenant key that is empty
(a ``${VAR:-}`` whose variable is unset), naming the variable when the config's text shows it, and a
louder one for a tenant left with no key at all: every request it makes would get 401.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gateway.config.schema.root import GatewayConfig, key_digest, key_text

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
RUN_SCRIPT_KEY = "DEFAULT_TENANT_KEY"
"""The variable ``./bin/run`` makes (kept in ``<data dir>/default-tenant-key``) and exports when it is unset:
a shell without it is no sign that the gateway ``./bin/run`` starts will lack it."""


@dataclass(frozen=True, slots=True)
class Notice:
    level: str
    """``info`` or ``warning``."""
    event: str
    text: str
    fields: dict[str, Any]


def startup_notices(config: GatewayConfig, text: str | None = None) -> list[Notice]:
    """``text``: the config file as written, to name the variables behind empty keys."""
    notices = [
        Notice(
            "info",
            "upstream_provider",
            f"provider {name}: {provider.base_url} (API key {'set' if provider.api_key else 'not set'})",
            {"provider": name, "base_url": provider.base_url, "api_key_set": bool(provider.api_key)},
        )
        for name, provider in config.providers.items()
    ]
    written = _written_keys(text)
    for name, tenant in config.tenants.items():
        empty = [index for index, key in enumerate(tenant.keys) if key_digest(key_text(key)) is None]
        if not empty:
            continue
        variables = sorted(
            {var for index in empty for var in _VAR.findall(written.get(name, {}).get(index, ""))}
        )
        unset = f" ({', '.join(variables)} unset or empty)" if variables else ""
        fields: dict[str, Any] = {"tenant": name, "empty_keys": len(empty), "variables": variables}
        if len(empty) == len(tenant.keys):
            which = "its key is" if len(empty) == 1 else f"all {len(empty)} keys are"
            message = f"tenant {name} has no usable key: {which} empty{unset}; its requests will get 401"
        else:
            message = f"tenant {name}: {len(empty)} of its {len(tenant.keys)} keys are empty{unset}"
        notices.append(Notice("warning", "tenant_key_empty", message, fields))
    return notices


def admin_notice(admin_key_set: bool) -> Notice:
    """Whether the admin routes (``/admin/*``: config, costs, behaviour maps, experiments) answer."""
    text = (
        "admin routes on: /admin/* with GATEWAY_ADMIN_KEY"
        if admin_key_set
        else "admin routes off: set GATEWAY_ADMIN_KEY to turn on /admin/* (config, costs, reports)"
    )
    return Notice("info", "admin_routes", text, {"enabled": admin_key_set})


def made_by_run_script(notice: Notice) -> bool:
    """A tenant's keys all empty only for want of ``DEFAULT_TENANT_KEY``, which ``./bin/run`` makes."""
    return notice.event == "tenant_key_empty" and notice.fields["variables"] == [RUN_SCRIPT_KEY]


def _written_keys(text: str | None) -> dict[str, dict[int, str]]:
    """Each tenant's keys as written (before interpolation), by position; empty when unreadable."""
    if text is None:
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    tenants = data.get("tenants") if isinstance(data, dict) else None
    if not isinstance(tenants, dict):
        return {}
    written: dict[str, dict[int, str]] = {}
    for name, tenant in tenants.items():
        keys = tenant.get("keys") if isinstance(tenant, dict) else None
        if isinstance(keys, list):
            written[str(name)] = {index: str(key) for index, key in enumerate(keys)}
    return written


def warnings_of(config: GatewayConfig, path: Path) -> list[Notice]:
    """The warnings among the notices of the config loaded from ``path``."""
    try:
        text: str | None = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None
    return [notice for notice in startup_notices(config, text) if notice.level == "warning"]
