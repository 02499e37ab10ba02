"""`fwloop_notify`: the channels a run's plateau and end are announced on, checked before the
baseline so that a typo is a usage error, not a silent run.

Seed 001's `ci_notification_channels` names channels ("email", "slack", "webhook"); a loop that
ran a mail or chat client of its own would need their credentials, so a channel here is either
an executable (`command:PATH`, which may send mail or post to a chat) or a webhook URL.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pytest_fwloop.agents.command import CommandProvider
from pytest_fwloop.agents.errors import ProviderError

COMMAND = "command:"
WEBHOOK_SCHEMES = ("http", "https")


def notify_channels(lines: tuple[str, ...], origin: str, rootdir: Path) -> tuple[str, ...]:
    """Each channel of `lines` (several on a line may be separated by spaces), checked: a
    command exists and is executable, a URL names a host. UsageError naming the fix."""
    channels = tuple(word for line in lines for word in line.split())
    for channel in channels:
        problem = _problem(channel, rootdir)
        if problem:
            raise pytest.UsageError(f"fwloop: {origin}: {channel!r}: {problem}")
    return channels


def _problem(channel: str, rootdir: Path) -> str:
    if channel.startswith(COMMAND):
        try:
            CommandProvider(channel.removeprefix(COMMAND), rootdir).preflight()
        except ProviderError as exc:
            return exc.message
        return ""
    parts = urlsplit(channel)
    try:
        parts.port  # noqa: B018 -- reading it checks it
    except ValueError as exc:
        return f"{exc}; fix the URL"
    if parts.scheme in WEBHOOK_SCHEMES and parts.hostname:
        return ""
    return (
        "not a notification channel; use command:PATH (an executable that reads the JSON "
        "document on stdin) or an http:// or https:// webhook URL"
    )


def described(channel: str) -> str:
    """The channel as records name it: a webhook's path and query may hold its token, so only
    `scheme://host:port/…` is kept (no user or password either)."""
    if channel.startswith(COMMAND):
        return channel
    parts = urlsplit(channel)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}/…"
