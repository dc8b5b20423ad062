"""Each signer's private key and its file: what only that person can read.

Why a file of the signer's own: a sign-off is signed with a key only its signer can read
(``~/.reckon/signing_key.pem``, mode 0600, owned by them), so whoever writes the report
database cannot forge one (reckon/signing.py checks the signatures). ``load`` refuses a key
another account owns or can read: such a key says nothing about who signed.

Example:
    >>> from reckon.signing import verify_signature
    >>> key = SigningKey.generate()
    >>> verify_signature(key.public_text, key.sign(b"entry hash"), b"entry hash")
    True
"""

from __future__ import annotations

import base64
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reckon.errors import UsageError
from reckon.signing import PUBLIC_PREFIX, key_id_of

__all__ = ["DEFAULT_KEY_FILE", "SigningKey", "key_file"]

#: under the signer's home directory, when the ``signing_key`` setting is empty
DEFAULT_KEY_FILE = Path(".reckon") / "signing_key.pem"


def key_file(setting: str) -> Path:
    """Where this account's private key lives: the ``signing_key`` setting, or
    ``~/.reckon/signing_key.pem`` (the home of the account that runs reckon).

    >>> key_file("/keys/ana.pem")
    PosixPath('/keys/ana.pem')
    """
    return Path(setting).expanduser() if setting else Path.home() / DEFAULT_KEY_FILE


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
        return PUBLIC_PREFIX + base64.b64encode(raw).decode("ascii")

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
