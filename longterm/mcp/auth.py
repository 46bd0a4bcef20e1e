"""Who is calling over HTTP: bearer tokens mapped to users, read from a JSON file.

The seam: ``Tokens.load(path)`` reads the file once at start; ``tokens.user(header)`` turns
an ``Authorization`` header into the user it names, or ``None`` (the server answers 401).
The file (``--tokens`` or ``LONGTERM_MCP_TOKENS``)::

    {"tokens": [
        {"user": "alice", "token": "a long random secret"},
        {"user": "bob", "token_sha256": "<hex sha256 of bob's token>"}
    ]}

Why digests: tokens are kept (and may be written) only as SHA-256 digests, so the lookup
is one dict access on the digest, whose timing says nothing about the token, and a file
holding only ``token_sha256`` entries leaks no usable secret. Why a minimum length: the
token is the only thing between one user and another's memories.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, LongTermMemoryError
from ..records import check_id

#: Shortest token accepted (characters): a guessable token would be a shared memory.
MIN_TOKEN_CHARS = 16


def digest(token: str) -> str:
    """The SHA-256 hex digest under which a token is kept."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Tokens:
    """Bearer token digests -> user ids."""

    def __init__(self, users_by_digest: dict[str, str]) -> None:
        if not users_by_digest:
            raise ConfigurationError('the token file names no tokens; add {"user": ..., "token": ...} entries.')
        self._users = users_by_digest

    @property
    def users(self) -> list[str]:
        """Every user some token names, each once, in file order."""
        return list(dict.fromkeys(self._users.values()))

    def user(self, authorization: str | None) -> str | None:
        """The user an ``Authorization: Bearer <token>`` header names, else None."""
        if not authorization or authorization[:7].lower() != "bearer ":
            return None
        token = authorization[7:].strip()
        return self._users.get(digest(token)) if token else None

    @classmethod
    def load(cls, path: str | Path) -> Tokens:
        where = f"token file {path}"
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(f"cannot read {where}: {exc.strerror or exc}.") from None
        except ValueError as exc:  # not UTF-8, or not JSON
            raise ConfigurationError(f"{where} is not a JSON file ({exc}); see docs/mcp.md for its format.") from None
        entries = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            raise ConfigurationError(f'{where} must be a JSON object with a "tokens" list; see docs/mcp.md.')
        users: dict[str, str] = {}
        for i, entry in enumerate(entries):
            key = _entry_digest(where, i, entry)
            if key in users:
                raise ConfigurationError(
                    f"{where}: entry {i} repeats the token of an earlier entry; tokens must differ."
                )
            try:
                users[key] = check_id("user", entry.get("user"))
            except LongTermMemoryError as exc:
                raise ConfigurationError(f"{where}: entry {i}: {exc}") from None
        return cls(users)


def _entry_digest(where: str, i: int, entry: Any) -> str:
    if not isinstance(entry, dict) or ("token" in entry) == ("token_sha256" in entry):
        raise ConfigurationError(
            f'{where}: entry {i} must be an object with "user" and one of "token", "token_sha256".'
        )
    if "token" in entry:
        token = entry["token"]
        # Visible ASCII only: an HTTP header carries nothing else intact, so any other token could
        # never authenticate.
        if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or not all("!" <= c <= "~" for c in token):
            raise ConfigurationError(
                f"{where}: entry {i}: a token must be at least {MIN_TOKEN_CHARS} visible ASCII characters (no spaces); "
                "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        return digest(token)
    hexdigest = entry["token_sha256"]
    if not isinstance(hexdigest, str) or len(hexdigest) != 64 or any(c not in "0123456789abcdef" for c in hexdigest):
        raise ConfigurationError(f"{where}: entry {i}: token_sha256 must be 64 lowercase hex digits.")
    return hexdigest
