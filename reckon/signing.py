"""Each signer's own ed25519 key: why a sign-off cannot be forged by whoever writes the database.

The sign-off log's hash chain (reports.review) shows an edit, but anyone who can write the
report database can recompute it. So every entry is also signed by its signer's private key,
which only that person can read (``~/.reckon/signing_key.pem``, mode 0600, owned by them), and
verify-log checks the signature against the public key an administrator registered for that
name; the registration is itself signed by the administrator's key, whose public half is
pinned in the configuration (``signoff_admin_key``), outside the warehouse. Keys are
``cryptography``'s Ed25519; a public key is written ``ed25519:<base64 of its 32 bytes>`` and
named by its key id (the first 16 hex digits of the SHA-256 of those bytes).

Example:
    >>> key = SigningKey.generate()
    >>> verify_signature(key.public_text, key.sign(b"entry hash"), b"entry hash")
    True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from reckon.errors import UsageError

__all__ = ["DEFAULT_KEY_FILE", "SigningKey", "key_file", "key_id_of", "load_public",
           "verify_signature"]

#: under the signer's home directory, when the ``signing_key`` setting is empty
DEFAULT_KEY_FILE = Path(".reckon") / "signing_key.pem"
_PREFIX = "ed25519:"


def key_file(setting: str) -> Path:
    """Where this account's private key lives: the ``signing_key`` setting, or
    ``~/.reckon/signing_key.pem`` (the home of the account that runs reckon).

    >>> key_file("/keys/ana.pem")
    PosixPath('/keys/ana.pem')
    """
    return Path(setting).expanduser() if setting else Path.home() / DEFAULT_KEY_FILE


def load_public(text: str) -> Ed25519PublicKey:
    """A public key from its text form ``ed25519:<base64>``; one line when it is not one."""
    raw = b""
    if text.strip().startswith(_PREFIX):
        try:
            raw = base64.b64decode(text.strip()[len(_PREFIX):], validate=True)
        except (binascii.Error, ValueError):
            raw = b""
    if len(raw) != 32:
        raise UsageError(f"public key {text[:60]!r} is not valid: write it as reckon keys init "
                         "prints it, ed25519:<base64 of 32 bytes>")
    return Ed25519PublicKey.from_public_bytes(raw)


def key_id_of(public_text: str) -> str:
    """The short name of a public key: 16 hex digits of the SHA-256 of its 32 bytes."""
    raw = load_public(public_text).public_bytes(serialization.Encoding.Raw,
                                                serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def verify_signature(public_text: str, signature_hex: str, data: bytes) -> bool:
    """Whether ``signature_hex`` is the key's signature of ``data`` (False for garbage)."""
    try:
        load_public(public_text).verify(bytes.fromhex(signature_hex), data)
    except (InvalidSignature, ValueError, UsageError):
        return False
    return True


@dataclass(frozen=True)
class SigningKey:
    """A private key in memory: what signs an entry (``sign``) and how it is named."""

    private: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(Ed25519PrivateKey.generate())

    @property
    def public_text(self) -> str:
        raw = self.private.public_key().public_bytes(serialization.Encoding.Raw,
                                                     serialization.PublicFormat.Raw)
        return _PREFIX + base64.b64encode(raw).decode("ascii")

    @property
    def key_id(self) -> str:
        return key_id_of(self.public_text)

    def sign(self, data: bytes) -> str:
        """The signature of ``data``, as hex."""
        return self.private.sign(data).hex()

    def save(self, path: Path) -> None:
        """Write the key to a new file readable only by this account (0600, in a 0700
        folder); an existing key is never overwritten (it may have signed entries)."""
        if path.exists():
            raise UsageError(f"{path} already holds a signing key: it may have signed entries, "
                             "so it is kept; give another file with --key-file to make a new one")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        pem = self.private.private_bytes(serialization.Encoding.PEM,
                                         serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)

    @classmethod
    def load(cls, path: Path) -> SigningKey:
        """This account's key from ``path``, refused in one line when it is missing, not
        this account's, or readable by anyone else (then it proves nothing about who signed)."""
        try:
            info = path.stat()
            data = path.read_bytes()
        except FileNotFoundError:
            raise UsageError(f"no signing key at {path}: run `reckon keys init` to make yours, "
                             "then have the administrator register it (`reckon keys register "
                             "NAME --public-key ...`)") from None
        except PermissionError:
            raise UsageError(f"cannot read the signing key {path}: it is not this account's "
                             "(each person signs with their own key)") from None
        if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise UsageError(f"signing key {path} is readable by others or not this account's "
                             f"(mode {stat.S_IMODE(info.st_mode):04o}): `chmod 600 {path}` as "
                             "its owner; a key others can read does not say who signed")
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise UsageError(f"{path} is not an ed25519 key (make one with `reckon keys init`)")
        return cls(key)
