"""The ``aescbc`` and ``aesgcm`` providers, in upstream's stored formats.

* aescbc: a random 16-byte IV, then AES-CBC of the PKCS#7-padded plaintext;
* aesgcm: a random 12-byte nonce, then AES-GCM's ciphertext and 16-byte tag,
  with the key as authenticated data.

Keys are 16, 24 or 32 bytes (AES-128/192/256).
"""
from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM as _GCM

from kapiserver.storage.value.transformer import TransformError

BLOCK = 16
GCM_NONCE = 12


class AESCBC:
    def __init__(self, key: bytes) -> None:
        self._algorithm = algorithms.AES(key)

    def from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        if len(data) < BLOCK:
            raise TransformError("the stored data was shorter than the required size")
        iv, body = data[:BLOCK], data[BLOCK:]
        if len(body) % BLOCK:
            raise TransformError("the stored data is not a multiple of the block size")
        decryptor = Cipher(self._algorithm, modes.CBC(iv)).decryptor()
        padded = decryptor.update(body) + decryptor.finalize()
        if not padded:
            raise TransformError("invalid PKCS7 data (empty or not padded)")
        size = padded[-1]
        if size == 0 or size > len(padded):
            raise TransformError("invalid PKCS7 data (empty or not padded)")
        if padded[-size:] != bytes([size]) * size:
            raise TransformError("invalid padding on input")
        return padded[:-size], False

    def to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        size = BLOCK - len(data) % BLOCK
        iv = os.urandom(BLOCK)
        encryptor = Cipher(self._algorithm, modes.CBC(iv)).encryptor()
        return iv + encryptor.update(data + bytes([size]) * size) + encryptor.finalize()


class AESGCM:
    def __init__(self, key: bytes) -> None:
        self._aead = _GCM(key)

    def from_storage(self, data: bytes, authenticated_data: bytes) -> tuple[bytes, bool]:
        if len(data) < GCM_NONCE:
            raise TransformError("the stored data was shorter than the required size")
        try:
            return self._aead.decrypt(data[:GCM_NONCE], data[GCM_NONCE:], authenticated_data), False
        except InvalidTag:
            raise TransformError("cipher: message authentication failed") from None

    def to_storage(self, data: bytes, authenticated_data: bytes) -> bytes:
        nonce = os.urandom(GCM_NONCE)
        return nonce + self._aead.encrypt(nonce, data, authenticated_data)

