"""An error reply of an OpenAI-compatible server as the ProviderError it stands for: its kind
read from the status and the body together, and the one remedy the user needs."""

from __future__ import annotations

from pytest_fwloop.agents.chat.refusals import refuses_request
from pytest_fwloop.agents.chat.transport import Reply
from pytest_fwloop.agents.errors import Conversed, ProviderError, ProviderErrorKind, kind_of_status
from pytest_fwloop.agents.retry import parse_retry_after


def http_error(
    reply: Reply,
    spec: str,
    url: str,
    keyed: tuple[str, str],
    stderr: str,
    usage: dict[str, float],
    conversed: Conversed,
) -> ProviderError:
    """An HTTP error reply as the ProviderError it stands for, with the remedy it calls for.
    `keyed`: the API key (scrubbed from the text) and the variable it is read from."""
    key, key_env = keyed
    text = scrub(reply.error_text(), key)
    detail = f"HTTP {reply.status} from {url}: {text}"
    header = reply.headers.get("Retry-After")
    retry_after = parse_retry_after(header) if header is not None else None
    kind = kind_of_status(reply.status, detail)
    if kind is ProviderErrorKind.PROVIDER_AUTH_ERROR:
        remedy = f"check the key in ${key_env}" if key else f"put the API key in ${key_env}"
        message = f"{detail}; {remedy}"
    elif reply.status >= 500 and refuses_request(reply.status, text):
        # llama-cpp-python reports its own request validation as a 500: an answer about
        # what was sent, which no retry changes.
        kind = ProviderErrorKind.PROVIDER_BAD_OUTPUT
        message = (
            f"{detail}; the server refused the request as sent (its HTTP {reply.status} is "
            "a refusal, not a network fault): check that it takes OpenAI chat completions, "
            "or fix what it names (fwloop_response_format for the answer's format)"
        )
    elif kind is ProviderErrorKind.PROVIDER_BAD_OUTPUT:
        message = f"{detail}; check the model name and that the URL is the API base (…/v1)"
    else:
        message = detail
    return ProviderError(
        kind,
        spec,
        message,
        retry_after=retry_after,
        stderr=stderr,
        usage=usage,
        conversation=conversed,
    )


def scrub(text: str, key: str) -> str:
    """`text` without the API key: a server may echo what it was sent."""
    return text.replace(key, "***") if key else text
