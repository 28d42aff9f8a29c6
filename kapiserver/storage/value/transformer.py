"""The transformer contract and the prefix chooser every provider list is built from.

A transformer turns plaintext into stored bytes and back.  ``from_storage``
also says whether the value is *stale*: readable, but not in the form a write
would produce now (an older key, or a provider that is no longer first), so
a rewrite of the unchanged object must still reach storage (upstream's
``stale`` flag: that is how ``kubectl replace`` of every Secret rotates keys).

The authenticated data of a value is its full key as etcd holds it
(``/registry/secrets/default/db``): AES-GCM binds the ciphertext to it, so a
value copied under another key does not decrypt.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

# Reserved for encrypted values: plain JSON starts with "{", upstream's protobuf with "k8s\x00".
ENCRYPTED_PREFIX = b"k8s:enc:"


class TransformError(Exception):
    """A stored value could not be decrypted (wrong key, damaged data, no provider for its prefix)."""


class Transformer(Protocol):
    def from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        """The plaintext of ``data`` and whether it is stale; raises TransformError."""

    def to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        """The stored form of the plaintext ``data``."""


class Identity:
    """No encryption; refuses to hand out encrypted bytes as if they were plaintext
    (upstream's ``NewEncryptCheckTransformer``)."""

    def from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        if data.startswith(ENCRYPTED_PREFIX):
            raise TransformError("identity transformer tried to read encrypted data")
        return data, False

    def to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        return data


@dataclass(frozen=True)
class PrefixTransformer:
    prefix: bytes
    transformer: Transformer


class PrefixTransformers:
    """Write with the first; read with the first whose prefix the value starts with.

    As upstream: a failure of one candidate does not stop the next one with a
    matching prefix from being tried (two ``aescbc`` providers share a prefix
    while a key is rotated in), and an empty prefix (identity) that fails is
    skipped silently.  A value read by anything but the first is stale.
    """

    def __init__(self, transformers: Sequence[PrefixTransformer], no_match: str) -> None:
        if not transformers:
            raise ValueError("at least one transformer is needed")
        self.transformers = list(transformers)
        self.no_match = no_match

    def from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        errors: list[str] = []
        for index, candidate in enumerate(self.transformers):
            if not data.startswith(candidate.prefix):
                continue
            try:
                plain, stale = candidate.transformer.from_storage(data[len(candidate.prefix):], authenticated_data)
            except TransformError as e:
                if candidate.prefix:
                    errors.append(str(e))
                continue
            return plain, stale or index != 0
        if errors:
            raise TransformError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
        raise TransformError(self.no_match)

    def to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        first = self.transformers[0]
        return first.prefix + first.transformer.to_storage(data, authenticated_data)
