"""The `fwloop` pytest plugin: options always, everything else only when asked.

Without `--fwloop` this module adds its options and hook specs and nothing more, so plain `pytest`
runs exactly as with `-p no:fwloop`. With `--fwloop` the process becomes the loop's controller in
`pytest_cmdline_main`, before any collection, as pytest-xdist's looponfail does.
"""

from __future__ import annotations

import pytest

# Loaded with the plugin, so it records the search path before pytest's configuration adds to it.
import pytest_fwloop.child.pristine  # noqa: F401
from pytest_fwloop import hookspecs
from pytest_fwloop.config.option_table import (
    CHILD_GCOV_FLAG,
    CHILD_JUNIT_FLAG,
    CHILD_QEMU_FLAG,
    CHILD_REPORT_FLAG,
    CHILD_SELECT_FLAG,
    CHILD_SPECTRUM_FLAG,
    add_options,
)

#: The plugin's fixtures: inert until a test requests one of them.
pytest_plugins = ["pytest_fwloop.fixtures"]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("fwloop") or config.getoption("help") or config.getoption("version"):
        return None
    if config.getoption(_dest(CHILD_REPORT_FLAG)) or config.getoption(_dest(CHILD_SELECT_FLAG)):
        # A loop's own child, which met `--fwloop` in the ini's addopts: it runs the tests.
        return None
    # Imported here so that plain pytest never pays for the controller's imports.
    from pytest_fwloop.loop.entry import run_loop

    return int(run_loop(config))


def pytest_configure(config: pytest.Config) -> None:
    report = config.getoption(_dest(CHILD_REPORT_FLAG))
    select = config.getoption(_dest(CHILD_SELECT_FLAG))
    if report or select:
        from pytest_fwloop.child.plugin import register_child_plugins

        register_child_plugins(
            config,
            report,
            select,
            config.getoption(_dest(CHILD_JUNIT_FLAG)),
            config.getoption(_dest(CHILD_SPECTRUM_FLAG)),
            config.getoption(_dest(CHILD_GCOV_FLAG)),
            config.getoption(_dest(CHILD_QEMU_FLAG)),
        )


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")
