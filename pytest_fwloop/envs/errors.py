"""Exceptions that separate "the environment is down" from "the firmware answered wrongly".

The loop treats an `EnvironmentFailure` as TEST_ENV_FAILURE (reset and retry, never a coder call),
while `ConsoleTimeout` is an ordinary test failure: the firmware did not answer in time.
"""

from __future__ import annotations


class EnvironmentFailure(Exception):
    """The test environment itself is unavailable: no banner, port gone, binary missing."""


class ConsoleTimeout(AssertionError):
    """An expected pattern did not appear on the console in time; the firmware's fault."""
