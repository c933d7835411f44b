"""A serving worker's heap once it has started: what starting made is kept out of the collector's sight,
and the collector runs a tenth as often.

A started worker holds about 100,000 objects the cyclic garbage collector tracks (the config and its
schema, FastAPI and the routes, the clients, the modules' own objects), and nearly all of them live as
long as the process. Python's default thresholds (700, 10, 10) ran a full collection, walking them all
(about 50 ms), every few hundred requests, and the small collections more than once a request: a tenth of
a busy worker's CPU went to the collector, which found almost nothing (a request's objects are freed by
their reference counts). ``gc.freeze()`` moves what starting made into a generation no collection walks,
and the first threshold at 7,000 (``YOUNG_THRESHOLD``) lets ten times as many objects be made between two
collections: about 1% of the CPU is left to the collector. The most a collection can then leave waiting is
the objects made since the last one that are only kept alive by a cycle: a few MiB at worst.

Frozen objects are never collected, so the freeze is done once, after a collection, when the worker is
ready, and only in a server's worker: a process that builds many apps, such as the tests', would keep
every one of them.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 7_000
"""Objects made (less those freed) between two collections of the youngest generation (Python's: 700)."""


def freeze_started_heap() -> int:
    """Collect, freeze everything left, and raise the first threshold; the number of objects frozen."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return gc.get_freeze_count()
