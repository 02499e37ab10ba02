"""`python -m pytest_fwloop.cli`: the `fwloop` command where its script is not on PATH."""

from __future__ import annotations

import sys

from pytest_fwloop.cli.main import main

sys.exit(main())
