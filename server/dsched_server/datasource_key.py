"""The key that encrypts datasource passwords at rest (README "Datasources").

Passwords are stored as Fernet tokens (AES-128-CBC with an HMAC-SHA256, from ``cryptography``);
the key lives in a file outside the metadata database, so a copy of the database (a backup, a
dump handed to someone) holds no usable password. The file holds one urlsafe-base64 key per line:
the first encrypts, every one decrypts (``MultiFernet``), so a key is rotated by putting a new
one first and re-saving the passwords.

Only masters hold the key: a master decrypts a password when it dispatches an attempt that needs
it, and sends it to the worker over the cluster listener (ARCHITECTURE.md §16). Every master of a
cluster must have the same file (``datasource_key_file``). A standalone creates one, mode 0600,
in its data directory the first time it needs it; a cluster master never creates one (each master
would make its own, and none could read another's passwords): without the file, storing a password
is FAILED_PRECONDITION and resolving one fails the attempt, saying why.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import threading
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from dsched.errors import FailedPrecondition

KEY_FILE_NAME = "datasource.key"


class KeyUnavailable(FailedPrecondition):
    """There is no key to encrypt or decrypt with (or the stored token does not match it)."""


class DatasourceKey:
    """Encrypts and decrypts datasource passwords with the key file at ``path``, read on first
    use (and created there first if ``create`` is true)."""

    def __init__(self, path: Path, *, create: bool) -> None:
        self.path = path
        self._create = create
        self._fernet: MultiFernet | None = None
        self._lines: list[bytes] = []
        self._lock = threading.Lock()

    def encrypt(self, password: str) -> str:
        return self._keys(for_writing=True).encrypt(password.encode()).decode("ascii")

    def digest(self, password: str) -> str:
        """A keyed digest of ``password`` (HMAC-SHA256 under the current key): the same password
        gives the same digest, and nobody without the key can test guesses against it. A
        request's fingerprint (the request log) is taken with it in place of the password."""
        key = base64.urlsafe_b64decode(self._key_lines()[0])
        return hmac.new(key, password.encode(), hashlib.sha256).hexdigest()

    def decrypt(self, token: str) -> str:
        try:
            return self._keys(for_writing=False).decrypt(token.encode("ascii")).decode()
        except InvalidToken:
            raise KeyUnavailable(
                f"the datasource key in {self.path} does not decrypt this password "
                "(another key encrypted it: every master needs the same key file)"
            ) from None

    def _keys(self, *, for_writing: bool) -> MultiFernet:
        with self._lock:
            if self._fernet is None:
                self._lines = self._load(for_writing)
                self._fernet = MultiFernet([Fernet(line) for line in self._lines])
            return self._fernet

    def _key_lines(self) -> list[bytes]:
        self._keys(for_writing=True)
        return self._lines

    def _load(self, for_writing: bool) -> list[bytes]:
        if not self.path.exists():
            if not (self._create and for_writing):
                raise KeyUnavailable(
                    f"no datasource key file at {self.path}: every master needs the same one "
                    "(README: Datasources)"
                )
            _create_key_file(self.path)
        try:
            lines = [line.encode() for line in self.path.read_text(encoding="ascii").split()]
            for line in lines:
                Fernet(line)  # a ValueError for anything but a key
            if not lines:
                raise ValueError("empty")
            return lines
        except (OSError, ValueError) as exc:
            # ValueError: not a key (and not echoing the file's content, which is the secret).
            raise KeyUnavailable(
                f"cannot use the datasource key file {self.path}: {type(exc).__name__}"
            ) from None


def _create_key_file(path: Path) -> None:
    """Writes a new key with mode 0600 from the start (never readable by others, not even for a
    moment); a file that appeared meanwhile (another process) is kept."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as file:
        file.write(Fernet.generate_key() + b"\n")
        file.flush()
        os.fsync(file.fileno())
