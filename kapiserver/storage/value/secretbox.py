"""The ``secretbox`` provider: NaCl's XSalsa20-Poly1305 with a 32-byte key, as upstream
(a random 24-byte nonce, then the 16-byte tag and the ciphertext: NaCl's ``secretbox.Seal``)."""
from __future__ import annotations

import nacl.exceptions
import nacl.secret
import nacl.utils

from kapiserver.storage.value.transformer import TransformError

NONCE = nacl.secret.SecretBox.NONCE_SIZE  # 24
OVERHEAD = nacl.secret.SecretBox.MACBYTES  # 16


class Secretbox:
    def __init__(self, key: bytes) -> None:
        self._box = nacl.secret.SecretBox(key)

    def from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        if len(data) < NONCE + OVERHEAD:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._box.decrypt(data[NONCE:], data[:NONCE]), False
        except nacl.exceptions.CryptoError:
            raise TransformError("output array was not large enough for encryption") from None

    def to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        nonce = nacl.utils.random(NONCE)
        return bytes(self._box.encrypt(data, nonce))  # nonce + tag + ciphertext
