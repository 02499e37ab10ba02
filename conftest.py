"""The repository's root conftest: `pytest .` from here runs the project's own tests.

The examples are projects of their own, each with its own suite and configuration, run from a
copy by `./dev.sh demo` and by tests/test_examples.py; collecting them here would mix the two.
"""

from __future__ import annotations

pytest_plugins = ["pytester"]
collect_ignore = ["examples"]
