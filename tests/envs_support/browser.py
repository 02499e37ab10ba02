"""A real headless Chromium (Debian's `chromium`) opening a local file, as a person would."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from envs_support.tools import require

#: What Chromium's log says when a page logs to the console or cannot load a resource.
CONSOLE_MARKERS = ("CONSOLE", "Failed to load resource", "Uncaught")


@dataclass(frozen=True)
class Opened:
    dom: str  # the DOM after loading, serialised
    screenshot: Path
    console: list[str]  # console messages and load failures, from Chromium's log


def open_page(page: Path, screenshot: Path) -> Opened:
    """Load `page` with scripts enabled (nothing may run), dump its DOM and take a screenshot."""
    chromium = require("chromium", "chromium")
    base = [
        chromium,
        "--headless",
        "--no-sandbox",  # CI containers run as root
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={screenshot.parent / 'chromium-profile'}",
    ]
    dumped = subprocess.run(
        [*base, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    shot = subprocess.run(
        [*base, "--window-size=1280,2400", f"--screenshot={screenshot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    log = (dumped.stderr + shot.stderr).splitlines()
    return Opened(
        dumped.stdout,
        screenshot,
        [line for line in log if any(marker in line for marker in CONSOLE_MARKERS)],
    )
