"""K candidates per iteration (DESIGN.md §19): asked, checked in scratch trees, one chosen."""
