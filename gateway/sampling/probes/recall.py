"""Probe recall: hits over answered probes (errors are not misses), per bucket and per (length, depth)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gateway.sampling.probes.needle import ProbeResult


@dataclass(frozen=True, slots=True)
class Tally:
    recalled: int = 0
    total: int = 0

    def add(self, recalled: bool) -> Tally:
        return Tally(self.recalled + int(recalled), self.total + 1)

    @property
    def recall(self) -> float | None:
        return self.recalled / self.total if self.total else None

    def __str__(self) -> str:
        recall = self.recall
        return "-" if recall is None else f"{recall:.0%} ({self.recalled}/{self.total})"


@dataclass(frozen=True, slots=True)
class RecallGrid:
    """Recall by asked length (rows) and needle depth (columns)."""

    lengths: tuple[int, ...] = ()
    depths: tuple[float, ...] = ()
    cells: dict[tuple[int, float], Tally] = field(default_factory=dict)

    def cell(self, length: int, depth: float) -> Tally:
        return self.cells.get((length, depth), Tally())

    def row(self, length: int) -> Tally:
        tally = Tally()
        for depth in self.depths:
            cell = self.cell(length, depth)
            tally = Tally(tally.recalled + cell.recalled, tally.total + cell.total)
        return tally

    @property
    def empty(self) -> bool:
        return not self.cells


def recall_grid(results: Iterable[ProbeResult]) -> RecallGrid:
    cells: dict[tuple[int, float], Tally] = {}
    for result in results:
        if not result.answered:
            continue
        key = (result.length, result.depth)
        cells[key] = cells.get(key, Tally()).add(result.recalled)
    return RecallGrid(
        lengths=tuple(sorted({length for length, _ in cells})),
        depths=tuple(sorted({depth for _, depth in cells})),
        cells=cells,
    )
