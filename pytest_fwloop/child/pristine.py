"""`python -m pytest`'s module search path before pytest's configuration adds to it.

The plugin imports this leaf first, so the value is taken before conftest folders and the ini's
`pythonpath` join `sys.path`: a forked child starts from it, as a spawned one would
(`start.py`).
"""

from __future__ import annotations

import sys

PRISTINE_SYS_PATH: tuple[str, ...] = tuple(sys.path)
