"""`python -m pytest_fwloop.docgen DOCS_DIR`: rewrite the generated pages of the docs.

Each page is rendered from the data it documents (the transition table, the options, the run
records); the project's tests fail when a page in `docs/` differs from its rendering.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from pytest_fwloop.docgen import configuration, fsm_page, run_directory

PAGES: dict[str, Callable[[], str]] = {
    "configuration.md": configuration.render_markdown,
    "fsm.md": fsm_page.render_markdown,
    "run-directory.md": run_directory.render_markdown,
}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pytest_fwloop.docgen DOCS_DIR", file=sys.stderr)
        return 2
    docs = Path(argv[0])
    for name, render in PAGES.items():
        (docs / name).write_text(render(), encoding="utf-8")
        print(f"wrote {docs / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
