"""Numbers a test records beside its outcome (docs/metrics.md), both sides of one protocol.

A test records a metric as a pair of `record_property` entries: `fwloop_metric_NAME` holds the
number and `fwloop_metric_NAME.better` says which way is an improvement (`lower`, the default,
or `higher`). The `fwloop_metric` fixture writes them; the child's recorder reads them back from
each report. Being properties, they survive pytest-xdist and land in the user's JUnit XML, and
outside the loop they are all the fixture does. The fixture (`pytest_fwloop/fixtures.py`) imports
this module when a test asks for it; it needs nothing but the standard library and pytest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any, Protocol

import pytest

PREFIX = "fwloop_metric_"
BETTER_SUFFIX = ".better"
DIRECTIONS = ("lower", "higher")
#: The whole-suite metric pytest-cov's total becomes.
COVERAGE = "coverage"
#: Decimals the coverage metric keeps.
COVERAGE_PLACES = 2
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class MetricRecorder(Protocol):
    """What `fwloop_metric` gives a test, for a suite that annotates its fixtures."""

    def __call__(self, name: str, value: float, better: str = "lower") -> None: ...


def check_metric(name: str, value: object, better: str) -> float:
    """The value as a float; ValueError naming what is wrong with the metric otherwise."""
    if not _NAME.fullmatch(name) or name.endswith(BETTER_SUFFIX):
        raise ValueError(
            f"fwloop_metric: {name!r} is not a metric name; use letters, digits, '_', '.', '-'"
        )
    if better not in DIRECTIONS:
        raise ValueError(f"fwloop_metric({name!r}): better={better!r}; use 'lower' or 'higher'")
    number = _number(value)
    if number is None:
        raise ValueError(f"fwloop_metric({name!r}): {value!r} is not a finite number")
    return number


def recorder(item: pytest.Item) -> MetricRecorder:
    """What the `fwloop_metric` fixture gives `item`: each call checks the metric and appends
    its two properties to the item's `user_properties`."""

    def record(name: str, value: float, better: str = "lower") -> None:
        number = check_metric(name, value, better)
        # As given when it is a number already, so a JUnit XML shows 412 rather than 412.0.
        item.user_properties.append(
            (f"{PREFIX}{name}", value if isinstance(value, int | float) else number)
        )
        item.user_properties.append((f"{PREFIX}{name}{BETTER_SUFFIX}", better))

    return record


def read_metrics(properties: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """The metrics among a report's user properties, as `results.Metric` reads them; a value
    that is not a number is left out (the fixture refuses one in the test itself)."""
    values: dict[str, float] = {}
    better: dict[str, str] = {}
    for entry in properties:
        key, value = entry
        if not isinstance(key, str) or not key.startswith(PREFIX):
            continue
        name = key[len(PREFIX) :]
        if name.endswith(BETTER_SUFFIX):
            better[name[: -len(BETTER_SUFFIX)]] = str(value)
            continue
        number = _number(value)
        if number is not None and _NAME.fullmatch(name):
            values[name] = number
    return {
        name: {"value": value, "better": better.get(name, "lower")}
        for name, value in values.items()
        if better.get(name, "lower") in DIRECTIONS
    }


def coverage_total(config: pytest.Config) -> float | None:
    """The TOTAL percentage pytest-cov reported for this run, if it did: its plugin keeps it
    once its report is made (any `--cov-report`, or `--cov-fail-under`), before sessionfinish.
    Rounded to COVERAGE_PLACES: pytest-cov keeps 35.294117647 where a person reads 35.29."""
    plugin = config.pluginmanager.get_plugin("_cov")
    total = _number(getattr(plugin, "cov_total", None))
    return None if total is None else round(total, COVERAGE_PLACES)


def _number(value: object) -> float | None:
    """A finite float from a number or its text (JUnit-minded suites record strings)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
