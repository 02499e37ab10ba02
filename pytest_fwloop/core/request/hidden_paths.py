"""Paths of the tree no model is shown and no tool reads, whatever the patch policy says:
version control, the loop's own records, files named like secrets (pure, and light: the
configuration imports it before the baseline's child is forked)."""

from __future__ import annotations

from pytest_fwloop.core.change.posix_paths import matching_glob

#: Folders no tool enters: version control and the loop's own records.
HIDDEN_PARTS = frozenset({".git", ".fwloop", ".hg", ".svn"})
#: Files never read, whatever the policy: keys, credentials, environments.
SECRET_FILES = (
    "**/.env",
    "**/.env.*",
    "**/*.pem",
    "**/*.key",
    "**/id_rsa*",
    "**/id_ecdsa*",
    "**/id_ed25519*",
    "**/.netrc",
    "**/*.p12",
    "**/*.pfx",
    "**/credentials*",
    "**/secrets*",
)


def is_secret(path: str) -> bool:
    return matching_glob(path, SECRET_FILES) is not None
