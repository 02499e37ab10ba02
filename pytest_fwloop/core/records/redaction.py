"""Secrets never reach the run directory: API keys and any variable named like a secret."""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
#: Shorter values would redact common words; real keys and tokens are far longer.
MIN_SECRET_LENGTH = 8


class Redactor:
    """Replaces the values of secret-named environment variables with a marker."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        secrets = {
            value: name
            for name, value in environ.items()
            if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH
        }
        # Longest first so a secret containing another is replaced whole.
        self._secrets = sorted(secrets.items(), key=lambda item: -len(item[0]))

    def __call__(self, text: str) -> str:
        for value, name in self._secrets:
            if value in text:
                text = text.replace(value, f"[redacted:{name}]")
        return text
