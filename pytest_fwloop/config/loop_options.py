"""The loop's options, read from pytest's config once into one typed value.

`read_options` takes every option of the table but the environment fixtures' (those are read by
the fixture a test requests) by precedence, with `resolve`'s errors; the settings are derived from
the value it returns, so nothing after it goes back to pytest's config for an option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pytest

from pytest_fwloop.config.options import origin, resolve

if TYPE_CHECKING:
    from pytest_fwloop.core.suite.flaky import FlakyPolicy


@dataclass(frozen=True)
class LoopOptions:
    """Each loop option's value, named as in the table (`fwloop_<name>`); a line list is a
    tuple."""

    max_iter: int
    goal: str
    evidence: str
    coder: str
    reviewer: str
    tester: str
    review_panel: str
    review_rule: Literal["all", "majority"]
    build: str
    build_shell: bool
    build_sandbox: str
    mode: str
    criteria: str
    confirm_runs: int | None
    knowledge: str
    run_dir: str
    flaky_reruns: int
    propose: str
    focus: bool
    candidates: int
    candidate_jobs: int
    child_start: str
    flaky_policy: FlakyPolicy
    metric_tolerance: Mapping[str, float]
    ci_terminate_as: Literal["warning", "failure"]
    notify: tuple[str, ...]
    notify_timeout: float
    protect: tuple[str, ...]
    allow_paths: tuple[str, ...]
    snapshot_exclude: tuple[str, ...]
    allowed_commands: tuple[str, ...]
    command_timeout: float
    precheck: str
    precheck_files: tuple[str, ...]
    precheck_timeout: float
    risky_patterns: tuple[str, ...]
    budget_usd: float | None
    budget_tokens: int | None
    keep: Literal["baseline", "best"]
    known_failures: str
    min_confidence: float
    timeout: float
    circuit_breaker: int
    build_clean: str
    api_key_env: str
    response_format: str
    claude_permission_mode: str
    claude_max_turns: int | None
    max_risk: float
    max_patch_files: int
    max_patch_lines: int
    review_rounds: int
    tester_schema_rounds: int
    agent_timeout: float
    build_timeout: float
    test_timeout: float
    state_timeout: float
    labgrid_reserve: str
    labgrid_coordinator: str
    labgrid_wait: float
    labgrid_client: str
    context_bytes: int
    source_bytes: int
    read_tools: bool
    model_context: int | None
    c_coverage: str
    #: Where each value came from (the flag, `$FWLOOP_<NAME>` or `ini fwloop_<name>`), as the
    #: errors found while deriving the settings name it.
    origins: Mapping[str, str]

    def origin(self, name: str) -> str:
        """Where option `name` was set, so an error sends the user to what they wrote."""
        return self.origins[name]


#: The options `read_options` reads, in the order their errors are reported.
LOOP_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(LoopOptions) if f.name != "origins")


def read_options(config: pytest.Config) -> LoopOptions:
    """Every loop option by precedence (command line > environment > ini > default), parsed and
    validated; the first bad value is a `pytest.UsageError` naming it and its source."""
    values: dict[str, Any] = {}
    for name in LOOP_OPTION_NAMES:
        value = resolve(config, name)
        values[name] = tuple(value) if isinstance(value, list) else value
    origins = {name: origin(config, name) for name in LOOP_OPTION_NAMES}
    return LoopOptions(**values, origins=origins)
