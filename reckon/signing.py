"""Each signer's own ed25519 key: why a sign-off cannot be forged by whoever writes the database.

The sign-off log's hash chain (reports.review) shows an edit, but anyone who can write the
report database can recompute it. So every entry is also signed by its signer's private key,
which only that person can read (``~/.reckon/signing_key.pem``, mode 0600, owned by them), and
verify-log checks the signature against the public key an administrator registered for that
name; the registration is itself signed by the administrator's key, whose public half is
pinned in the configuration (``signoff_admin_key``), outside the warehouse. Keys are
``cryptography``'s Ed25519; a public key is written ``ed25519:<base64 of its 32 bytes>`` and
named by its key id (the first 16 hex digits of the SHA-256 of those bytes).

A private key and its file (``SigningKey``, ``key_file``) are storage/signing_keys.py's; this
module holds the pure rules: reading a public key, naming it, checking a signature.

Example:
    >>> verify_signature("ed25519:" + "A" * 43 + "=", "00", b"entry hash")
    False
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PublicKey,
)

from reckon.errors import UsageError

__all__ = ["PUBLIC_PREFIX", "key_id_of", "load_public", "verify_signature"]

#: how a public key's text starts
PUBLIC_PREFIX = "ed25519:"


def load_public(text: str) -> Ed25519PublicKey:
    """A public key from its text form ``ed25519:<base64>``; one line when it is not one."""
    raw = b""
    if text.strip().startswith(PUBLIC_PREFIX):
        try:
            raw = base64.b64decode(text.strip()[len(PUBLIC_PREFIX):], validate=True)
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
