"""Why a shadow call was shed, counted by reason, and said in the report beside the ``shed`` count.

A shadow call is never queued: when the experiment's ``max_concurrency`` or the process's
``limits.shadow_calls`` calls are already running (``slots``), when the process used more than
``limits.shadow_shed_above_cpu`` of a core over the last second (``cpu``), or when it runs more than
``limits.shadow_shed_above_requests`` tasks (``tasks``), the sample is dropped. Each is counted as ``shed``
and as ``shed_<reason>``; days counted before the reasons were have ``shed`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from gateway.config.schema.limits import Limits

Reason = Literal["slots", "cpu", "tasks"]
REASONS: tuple[Reason, ...] = ("slots", "cpu", "tasks")
COUNTERS = tuple(f"shed_{reason}" for reason in REASONS)


def shed_reason(
    *,
    running: int,
    max_concurrency: int,
    in_flight: int,
    cpu_share: float,
    tasks: int,
    limits: Limits,
) -> Reason | None:
    """Why a new shadow call must be dropped now (None: it may start). ``running``: the experiment's calls
    in flight; ``in_flight``: the process's, all experiments'."""
    if running >= max_concurrency or in_flight >= limits.shadow_calls:
        return "slots"
    if cpu_share > limits.shadow_shed_above_cpu:
        return "cpu"
    if tasks > limits.shadow_shed_above_requests:
        return "tasks"
    return None


def shed_note(counters: Mapping[str, int], max_concurrency: int | None) -> str | None:
    """``shed N``, and why, in words; None when nothing was shed."""
    shed = counters.get("shed", 0)
    if not shed:
        return None
    own = f"max_concurrency {max_concurrency}" if max_concurrency is not None else "max_concurrency"
    why = {
        "slots": f"no free slot ({own} calls of this experiment, or limits.shadow_calls of the process,"
        " running)",
        "cpu": "the process busy (over limits.shadow_shed_above_cpu of a core)",
        "tasks": "the process busy (over limits.shadow_shed_above_requests tasks)",
    }
    parts = [f"{counters.get(f'shed_{reason}', 0):,} with {why[reason]}" for reason in REASONS]
    counted = sum(counters.get(f"shed_{reason}", 0) for reason in REASONS)
    found = [part for part, reason in zip(parts, REASONS, strict=True) if counters.get(f"shed_{reason}")]
    if shed > counted:
        found.append(f"{shed - counted:,} counted before reasons were")
    return (
        f"shed {shed:,}: dropped rather than queued, so the primary's answer never waits on them: "
        + "; ".join(found)
    )
