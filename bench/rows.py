"""A row of the benchmark table: one metric, one value per repetition, its target."""

from __future__ import annotations

import functools
import operator
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

MB = 1_000_000


@dataclass
class Row:
    case: str
    metric: str
    unit: str
    values: list[float] = field(default_factory=list)
    target: str = ""
    check: Callable[[float], bool] | None = None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def passed(self) -> bool | None:
        if self.check is None or not self.values:
            return None
        return self.check(self.median)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def at_most(case: str, metric: str, unit: str, limit: float, *, proposed: bool = False) -> Row:
    """A row whose median must not exceed `limit`; a `proposed` target is one
    put in place of an issue's that this machine's floor does not allow."""
    target = f"≤ {limit:g}" + (" (proposed)" if proposed else "")
    return Row(case, metric, unit, target=target, check=functools.partial(operator.ge, limit))


def at_least(case: str, metric: str, unit: str, limit: float) -> Row:
    """A row whose median must reach `limit`."""
    return Row(
        case, metric, unit, target=f"≥ {limit:g}", check=functools.partial(operator.le, limit)
    )
