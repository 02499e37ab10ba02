"""What a build is told when the loop records the C each test ran (DESIGN.md §18; pure).

The coverage build is the user's own build with two variables more in its environment, which
a build honours by adding them (`CFLAGS += $(FWLOOP_CFLAGS)` in a Makefile, `-DCMAKE_C_FLAGS=
"$FWLOOP_CFLAGS"` for CMake): the same sources and flags, plus `--coverage`, and a macro the
firmware may test to install the handler that writes its counts on request (docs/providers.md,
the C spectrum). A plain `make` outside the loop sees neither.
"""

from __future__ import annotations

#: Compiler and linker flags of a gcov build.
GCOV_CFLAGS = "--coverage -DFWLOOP_GCOV=1"
GCOV_LDFLAGS = "--coverage"


def build_variables(mode: str) -> dict[str, str]:
    """The variables the loop's build and clean commands get for `fwloop_c_coverage`."""
    if "gcov" not in mode.split("+"):
        return {}
    return {"FWLOOP_CFLAGS": GCOV_CFLAGS, "FWLOOP_LDFLAGS": GCOV_LDFLAGS}
