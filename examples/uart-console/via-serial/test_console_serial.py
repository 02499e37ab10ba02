"""tests/test_console.py, collected again here so that it runs with this directory's `console`."""

from tests.test_console import *  # noqa: F403
