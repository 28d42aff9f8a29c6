"""Static bearer tokens from a CSV file (upstream's ``--token-auth-file``).

Each line is ``token,user,uid[,"group1,group2"]``; further columns are
ignored, a line with an empty token is skipped (with a warning), a later line
wins over an earlier one with the same token.  The file is read once, at
start.  Tokens are kept only as SHA-256 digests, and looked up by digest, so
comparing a presented token takes the same time whatever it shares with a
real one.
"""
from __future__ import annotations

import csv
import hashlib
import io

from twisted.logger import Logger

from kapiserver.auth.authenticator import AuthResult, Outcome
from kapiserver.machinery.user import UserInfo

log = Logger()


class TokenFileError(Exception):
    """The file cannot be read or parsed; ``str()`` is one line naming it."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class StaticTokenAuthenticator:
    def __init__(self, users: dict[str, UserInfo]) -> None:
        self._users = {_digest(token): user for token, user in users.items()}

    def __len__(self) -> int:
        return len(self._users)

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Outcome:
        user = self._users.get(_digest(token))
        return AuthResult(user) if user is not None else None


def parse_token_csv(text: str, path: str) -> dict[str, UserInfo]:
    """token -> user of a token file's content (``path`` for messages)."""
    users: dict[str, UserInfo] = {}
    try:
        rows = list(csv.reader(io.StringIO(text), strict=True))
    except csv.Error as e:
        raise TokenFileError(f"{path}: not a CSV file: {e}") from None
    record = 0
    for row in rows:
        if not row:  # blank lines are not records (as Go's encoding/csv)
            continue
        if len(row) < 3:
            raise TokenFileError(f"{path}: token file must have at least 3 columns (token, user name, user uid), "
                                 f"found {len(row)}")
        record += 1
        token, name, uid = row[0], row[1], row[2]
        if not token:
            log.warn("empty token has been found in token file {path}, record number {n}", path=path, n=record)
            continue
        if token in users:
            log.warn("duplicate token has been found in token file {path}, record number {n}", path=path, n=record)
        groups = tuple(g for g in row[3].split(",") if g) if len(row) >= 4 else ()
        users[token] = UserInfo(name=name, groups=groups, uid=uid)
    return users


def load_token_file(path: str) -> StaticTokenAuthenticator:
    """Read ``path`` (blocking: at start); raises :class:`TokenFileError`."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except FileNotFoundError:
        raise TokenFileError(f"{path}: token file not found") from None
    except OSError as e:
        raise TokenFileError(f"{path}: cannot read token file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise TokenFileError(f"{path}: cannot read token file: {e}") from None
    return StaticTokenAuthenticator(parse_token_csv(text, path))
