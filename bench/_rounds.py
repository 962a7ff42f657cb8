"""Bench hygiene shared by the benchmarks: interleaved rounds, medians with ranges, ratios, load.

Contenders are run round by round (every contender once per round, the order
rotated each round) so a change in machine load hits all of them alike; each
figure is reported as the median over the rounds with its range, and as the
median of its per-round ratio to a baseline measured in the same round.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Figures = dict[str, float]


def load_text() -> str:
    """The machine's load averages and CPU count, printed beside every run."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}/{fifteen:.2f} on {os.cpu_count()} CPUs"


def interleave(
    contenders: Mapping[str, Callable[[], Figures]], rounds: int, *, label: str = ""
) -> dict[str, list[Figures]]:
    """Run every contender once per round, rotating the order; print each run with the load.

    Every other round runs the rotation backwards, so no contender always
    follows the same one (the one after a run finds the heap and caches that
    run left: a fixed cycle gave the same contender that advantage each round).
    """
    names = list(contenders)
    runs: dict[str, list[Figures]] = {name: [] for name in names}
    for r in range(rounds):
        shift = (r // 2) % len(names)
        order = names[shift:] + names[:shift]
        for name in order if r % 2 == 0 else order[::-1]:
            load = os.getloadavg()[0]
            figures = contenders[name]()
            figures["load_1min"] = load
            runs[name].append(figures)
            shown = "  ".join(f"{k} {v:.4g}" for k, v in figures.items() if k != "load_1min")
            print(f"  {label}round {r + 1}/{rounds} {name:22s} {shown}  [{load_text()}]", flush=True)
    return runs


def median_range(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def summarize(
    runs: Mapping[str, Sequence[Figures]],
    baseline: str,
    keys: Sequence[str],
    *,
    higher_is_better: Sequence[str] = (),
) -> dict[str, Any]:
    """Medians with ranges per contender and key, and per-round ratios to ``baseline``.

    A ratio is contender / baseline for costs (time, CPU, memory) and the same
    for rates in ``higher_is_better``; it is taken round by round (both measured
    under the same load) and its median and range are reported.
    """
    out: dict[str, Any] = {}
    base = runs[baseline]
    for name, figures in runs.items():
        for key in keys:
            values = [f[key] for f in figures if key in f]
            if not values:
                continue
            med, lo, hi = median_range(values)
            out[f"{name}.{key}"] = {"median": med, "min": lo, "max": hi}
            if name == baseline:
                continue
            ratios = [f[key] / b[key] for f, b in zip(figures, base) if key in f and b.get(key)]
            if ratios:
                med, lo, hi = median_range(ratios)
                out[f"{name}.{key}_vs_{baseline}"] = {"median": med, "min": lo, "max": hi}
    loads = [f["load_1min"] for figures in runs.values() for f in figures]
    out["load_1min"] = {"median": statistics.median(loads), "min": min(loads), "max": max(loads)}
    out["cpus"] = os.cpu_count()
    return out


def print_summary(title: str, summary: Mapping[str, Any]) -> None:
    """One line per figure: median [min – max]."""
    print(title)
    for key, value in summary.items():
        if isinstance(value, dict):
            print(f"  {key:56s} {value['median']:12.4g}  [{value['min']:.4g} – {value['max']:.4g}]")
        else:
            print(f"  {key:56s} {value}")
