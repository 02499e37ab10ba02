"""Firmware environments: one console interface, its transports, and their failure classes."""

from __future__ import annotations

from pytest_fwloop.envs.errors import ConsoleTimeout, EnvironmentFailure

__all__ = ["ConsoleTimeout", "EnvironmentFailure"]
