"""The behaviour report as JSON data (for ``GET /admin/probes/report`` and ``--json``).

Buckets are by the tokens the model received (``bucketed_by``); each says whether it has
``min_count`` samples (``enough_samples``: below it, the bucket is shown but not compared), the size
received (``received_tokens``), its action mix, and the side calls' seconds apart from the main call's
``latency_s``. ``boundary_note`` says why there is no boundary: too few samples to look, or none found.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from gateway.sampling.percentiles import Spread
from gateway.sampling.probes.recall import RecallGrid, Tally
from gateway.sampling.report.boundary import Boundary, Degradation, LengthBoundary
from gateway.sampling.report.report import BehaviourReport, BucketStats, WorstCell
from gateway.sampling.report.verdict import boundary_note


def iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_document(report: BehaviourReport) -> dict[str, Any]:
    return {
        "object": "gateway.behaviour_report",
        "model": report.model,
        "since": iso(report.since),
        "until": iso(report.until),
        "samples": report.samples,
        "oldest_sample": iso(report.oldest) if report.oldest is not None else None,
        "unknown_length": report.unknown_length,
        "bucketed_by": "forwarded_tokens",
        "min_count": report.boundary_config.min_count,
        "buckets": [bucket_document(stats) for stats in report.buckets],
        "boundary": boundary_document(report.boundary),
        "boundary_note": boundary_note(report),
        "degradations": [degradation_document(found) for found in report.degradations],
        "probe_recall": recall_document(report.recall),
        "probe_boundary": probe_boundary_document(report.probe_boundary),
    }


def probe_boundary_document(found: LengthBoundary | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "length": found.length,
        "previous_length": found.previous,
        "recall": round(found.recall, 4),
        "previous_recall": round(found.previous_recall, 4),
        "description": found.describe(),
    }


def bucket_document(stats: BucketStats) -> dict[str, Any]:
    bucket = stats.bucket
    return {
        "bucket": bucket.label,
        "min_tokens": bucket.low,
        "max_tokens": bucket.high,
        "count": stats.count,
        "enough_samples": stats.enough_samples,
        "probe_samples": stats.probe_samples,
        "received_tokens": _received(stats),
        "actions": stats.actions,
        "latency_s": _spread(stats.latency),
        "side_seconds_s": _spread(stats.side_seconds),
        "ttft_s": _spread(stats.ttft),
        "ttft_per_1k_s": _spread(stats.ttft_per_1k),
        "output_tokens": _spread(stats.output_tokens),
        "tokens_per_second": _spread(stats.tokens_per_second),
        "logprob_mean": _spread(stats.logprob_mean),
        "finish_reasons": stats.finish_reasons,
        "errors": stats.errors,
        "error_rate": _round(stats.error_rate),
        "length_or_empty_share": _round(stats.length_or_empty_share),
        "worst": _worst(stats.worst),
        "probes": _tally(stats.probes),
    }


def boundary_document(boundary: Boundary | None) -> dict[str, Any] | None:
    if boundary is None:
        return None
    return {
        "bucket": boundary.bucket.label,
        "min_tokens": boundary.bucket.low,
        "signals": list(boundary.signals),
        "details": [degradation.describe() for degradation in boundary.degradations],
    }


def degradation_document(found: Degradation) -> dict[str, Any]:
    return {
        "bucket": found.bucket.label,
        "signal": found.signal,
        "previous_bucket": found.previous.label,
        "previous_value": _round(found.previous_value),
        "value": _round(found.value),
        "ratio": None if math.isinf(found.ratio) else round(found.ratio, 3),
        "description": found.describe(),
    }


def recall_document(grid: RecallGrid) -> dict[str, Any]:
    return {
        "lengths": list(grid.lengths),
        "depths": list(grid.depths),
        "cells": [
            {"length": length, "depth": depth, **_tally(grid.cell(length, depth))}
            for length in grid.lengths
            for depth in grid.depths
            if grid.cell(length, depth).total
        ],
    }


def _spread(found: Spread | None) -> dict[str, float | int] | None:
    return found.as_dict() if found is not None else None


def _received(stats: BucketStats) -> dict[str, float | int] | None:
    """The prompt tokens the gateway received, whole tokens: the mean beside the spread."""
    if stats.received_tokens is None or stats.received_mean is None:
        return None
    found = stats.received_tokens
    return {
        "count": found.count,
        "mean": round(stats.received_mean),
        "p10": round(found.p10),
        "p50": round(found.p50),
        "p90": round(found.p90),
    }


def _tally(tally: Tally) -> dict[str, Any]:
    return {"recalled": tally.recalled, "total": tally.total, "recall": _round(tally.recall)}


def _worst(cell: WorstCell | None) -> dict[str, Any] | None:
    if cell is None:
        return None
    return {
        "count": cell.count,
        "latency_from_s": _round(cell.latency_from),
        "logprob_mean_p10": _round(cell.logprob_mean_p10),
        "logprob_min_p10": _round(cell.logprob_min_p10),
        "output_tokens_p10": _round(cell.output_tokens_p10),
    }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or math.isinf(value) else round(value, digits)
