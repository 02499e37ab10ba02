"""The `openai:MODEL@URL` spec read into its model and base URL."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

from pytest_fwloop.agents.errors import SpecError

_URL_AFTER_AT = re.compile(r"@(?=https?://)", re.IGNORECASE)


def parse_openai_argument(argument: str) -> tuple[str, str]:
    """`MODEL@URL` as (model, base URL without a trailing slash); SpecError names the bad part.

    The first `@` followed by `http(s)://` splits, so a model name may itself contain `@`.
    Credentials are refused before this, by the registry, without echoing them.
    """
    split = _URL_AFTER_AT.search(argument)
    if split is None:
        if "@" in argument:
            url = argument.rpartition("@")[2]
            raise SpecError(
                f"'{url}' is not an http:// or https:// URL; write openai:MODEL@URL, "
                "e.g. openai:qwen2.5-coder@http://127.0.0.1:8000/v1"
            )
        raise SpecError(
            f"'openai:{argument}' has no @URL; write openai:MODEL@URL, "
            "e.g. openai:qwen2.5-coder@http://127.0.0.1:8000/v1"
        )
    model, url = argument[: split.start()].strip(), argument[split.end() :].strip()
    if not model:
        raise SpecError(f"the model before @{url} is empty; write openai:MODEL@URL")
    if any(char.isspace() for char in model):
        raise SpecError(f"the model '{model}' contains whitespace; write openai:MODEL@URL")
    parts = urlsplit(url)
    if not parts.hostname:
        raise SpecError(f"the URL '{url}' has no host; write e.g. http://127.0.0.1:8000/v1")
    if parts.fragment or parse_qsl(parts.query):
        raise SpecError(
            f"the URL '{url}' has a query or fragment; give the API's base URL, e.g. "
            "http://127.0.0.1:8000/v1"
        )
    return model, url.rstrip("/")
