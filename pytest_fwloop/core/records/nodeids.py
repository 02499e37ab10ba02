"""What a node id of the loop's records may say besides a test (pure, and light: the patch
policy reads it before the baseline's child is forked, where pydantic is not yet imported)."""

from __future__ import annotations

#: Node ids of a tester command's record (DESIGN.md §5): it counts like a test, but it is not
#: one to rerun, focus on, or select.
COMMAND_NODEID_PREFIX = "tester::"
