"""The ``channel.k8s.io`` framing of remote commands, and their protocol names and Status messages.

Upstream: ``k8s.io/apimachinery/pkg/util/remotecommand`` (names, channel
numbers), ``wsstream/conn.go`` (framing), ``client-go/tools/remotecommand``
(``v4.go``'s error decoder, ``resize.go``), ``apiserver/pkg/util/proxy``
(``streamtranslator.go``'s Status messages).

Over WebSocket, every message starts with its channel: stdin 0, stdout 1,
stderr 2, the error channel 3 and terminal resize 4.  The binary protocols
(``channel.k8s.io``, ``v4.channel.k8s.io``, ``v5.channel.k8s.io``) put the
channel as a byte before the data; ``base64.channel.k8s.io`` and its ``v4``
sends text messages: the channel as an ASCII digit, then the data in base64.
From v4 on, the error channel carries a ``metav1.Status`` in JSON, once, when
the command has ended.  v5 adds a close message, ``[255, channel]``: the
client has no more data for that channel (stdin's EOF).

Over SPDY (towards the kubelet), each channel is a stream named by its
``streamType`` header, and the same protocol names are negotiated with
``X-Stream-Protocol-Version``.
"""
from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Optional, Union

from kapiserver.machinery import codec
from kapiserver.machinery.errors import status_object
from kapiserver.machinery.httpstream.websocket import Opcode

# Protocol names (k8s.io/apimachinery/pkg/util/remotecommand/constants.go)
STREAM_PROTOCOL_V1 = "channel.k8s.io"
STREAM_PROTOCOL_V2 = "v2.channel.k8s.io"
STREAM_PROTOCOL_V3 = "v3.channel.k8s.io"
STREAM_PROTOCOL_V4 = "v4.channel.k8s.io"
STREAM_PROTOCOL_V5 = "v5.channel.k8s.io"
BASE64_CHANNEL_PROTOCOL = "base64.channel.k8s.io"
BASE64_CHANNEL_PROTOCOL_V4 = "v4.base64.channel.k8s.io"
# What client-go's SPDY executor offers, most preferred first (NewSPDYExecutorForTransports)
SPDY_EXECUTOR_PROTOCOLS = (STREAM_PROTOCOL_V5, STREAM_PROTOCOL_V4, STREAM_PROTOCOL_V3, STREAM_PROTOCOL_V2,
                           STREAM_PROTOCOL_V1)
# The version each name stands for ("" is a server that negotiated nothing: v1)
PROTOCOL_VERSIONS = {STREAM_PROTOCOL_V1: 1, STREAM_PROTOCOL_V2: 2, STREAM_PROTOCOL_V3: 3, STREAM_PROTOCOL_V4: 4,
                     STREAM_PROTOCOL_V5: 5, "": 1}

# Port forwarding (k8s.io/apimachinery/pkg/util/portforward/constants.go)
PORT_FORWARD_PROTOCOL_V1 = "portforward.k8s.io"
TUNNELING_PREFIX = "SPDY/3.1+"
KUBERNETES_SUFFIX = ".k8s.io"

# Channels
STDIN = 0
STDOUT = 1
STDERR = 2
ERROR = 3
RESIZE = 4
CHANNEL_COUNT = 5
CLOSE_SIGNAL = 255  # v5: [255, channel]

# SPDY stream types (k8s.io/api/core/v1: StreamType and its values)
STREAM_TYPE_HEADER = "streamType"
STREAM_TYPE_ERROR = "error"
STREAM_TYPE_STDIN = "stdin"
STREAM_TYPE_STDOUT = "stdout"
STREAM_TYPE_STDERR = "stderr"
STREAM_TYPE_RESIZE = "resize"

NON_ZERO_EXIT_CODE_REASON = "NonZeroExitCode"
EXIT_CODE_CAUSE_TYPE = "ExitCode"


class ChannelProtocolError(Exception):
    """A message that does not follow the channel protocol."""


def protocol_is_base64(protocol: str) -> bool:
    return protocol in (BASE64_CHANNEL_PROTOCOL, BASE64_CHANNEL_PROTOCOL_V4)


def protocol_supports_close(protocol: str) -> bool:
    """Whether the protocol has the close message (v5 only, as wsstream's protocolSupportsStreamClose)."""
    return protocol == STREAM_PROTOCOL_V5


def is_tunneling_protocol(protocol: str) -> bool:
    """A Kubernetes SPDY protocol tunnelled in WebSocket (``SPDY/3.1+portforward.k8s.io``)."""
    return protocol.startswith(TUNNELING_PREFIX) and protocol.endswith(KUBERNETES_SUFFIX)


def encode_message(channel: int, data: bytes, *, base64_text: bool = False) -> tuple[Opcode, bytes]:
    """The WebSocket message carrying ``data`` on ``channel`` (its opcode and payload)."""
    if base64_text:
        return Opcode.TEXT, bytes([ord("0") + channel]) + base64.b64encode(data)
    return Opcode.BINARY, bytes([channel]) + data


def decode_message(message: bytes, *, base64_text: bool = False) -> tuple[int, bytes]:
    """A whole message's channel and data; raises :class:`ChannelProtocolError` on bad base64."""
    if not message:
        raise ChannelProtocolError("an empty message has no channel")
    if not base64_text:
        return message[0], message[1:]
    try:
        return message[0] - ord("0"), base64.b64decode(message[1:], validate=True)
    except binascii.Error as exc:
        raise ChannelProtocolError(f"invalid base64 data on channel {chr(message[0])!r}: {exc}") from None


def close_message(channel: int) -> bytes:
    """v5's message closing ``channel`` (stdin EOF for channel 0)."""
    return bytes([CLOSE_SIGNAL, channel])


def parse_close_message(message: bytes) -> int:
    """The channel a v5 close message names; wsstream's checks (exactly one channel byte)."""
    if len(message) != 2:
        raise ChannelProtocolError(f"Single channel byte should follow stream close signal. Got {len(message) - 1} bytes")
    return message[1]


# ---------------------------------------------------------------- the error channel's Status


def go_json(obj: Any) -> bytes:
    """``json.Marshal``: Go's escaping, no trailing newline."""
    return codec.encode_json(obj)[:-1]


def _without_type_meta(status: dict) -> dict:
    # the Status values these paths build have no TypeMeta: json.Marshal leaves kind/apiVersion out
    return {key: value for key, value in status.items() if key not in ("kind", "apiVersion")}


def success_status() -> dict:
    return _without_type_meta(status_object("Success"))


def internal_error_status(message: str) -> dict:
    """``apierrors.NewInternalError(errors.New(message)).Status()``."""
    return _without_type_meta(status_object("Failure", f"Internal error occurred: {message}", "InternalError",
                                            {"causes": [{"message": message}]}, 500))


def exit_code_status(message: str, exit_code: int) -> dict:
    """A non-zero exit as a Status: the cause ``ExitCode`` with the code as its message."""
    return _without_type_meta(status_object("Failure", message, NON_ZERO_EXIT_CODE_REASON,
                                            {"causes": [{"reason": EXIT_CODE_CAUSE_TYPE, "message": str(exit_code)}]}))


def translated_exit_status(exit_code: int) -> dict:
    """The stream translator's Status for an exit (``codeExitToStatusError``): the
    message wraps client-go's ``command terminated with exit code N``."""
    return exit_code_status(f"command terminated with non-zero exit code: command terminated with exit code {exit_code}",
                            exit_code)


_STATUS_ORDER = ("kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code")


def status_from_object(obj: dict) -> dict:
    """A decoded ``metav1.Status`` in Go's field order (as re-encoding it would write it)."""
    ordered = {key: obj[key] for key in _STATUS_ORDER if key in obj and obj[key] not in (None, "", 0)}
    ordered.setdefault("metadata", {})
    return {key: ordered[key] for key in _STATUS_ORDER if key in ordered}


@dataclass(frozen=True)
class CommandSucceeded:
    pass


@dataclass(frozen=True)
class CommandExited:
    exit_code: int


@dataclass(frozen=True)
class CommandFailed:
    message: str  # an error with this text (the translator answers it as an internal error)


CommandOutcome = Union[CommandSucceeded, CommandExited, CommandFailed]


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def decode_error_stream(version: int, message: bytes) -> CommandOutcome:
    """What client-go's executor makes of the error stream's whole content under
    protocol ``version`` (errorDecoderV4 for v4/v5, errorDecoderV2 for v2/v3, v1's text)."""
    if not message:
        return CommandSucceeded()
    text = message.decode("utf-8", "replace")
    if version <= 1:
        return CommandFailed(f"Error executing remote command: {text}")
    if version <= 3:
        return CommandFailed(f"error executing remote command: {text}")
    try:
        status = json.loads(message)
    except ValueError as exc:
        return CommandFailed(f"error stream protocol error: {exc} in {_go_quote(text)}")
    if not isinstance(status, dict):
        return CommandFailed(f"error stream protocol error: a JSON {type(status).__name__} is not a Status "
                             f"in {_go_quote(text)}")
    state = status.get("status")
    if state == "Success":
        return CommandSucceeded()
    if state != "Failure":
        return CommandFailed("error stream protocol error: unknown error")
    if status.get("reason") == NON_ZERO_EXIT_CODE_REASON:
        details = status.get("details")
        if not isinstance(details, dict):
            return CommandFailed("error stream protocol error: details must be set")
        for cause in details.get("causes") or []:
            if not isinstance(cause, dict) or cause.get("reason") != EXIT_CODE_CAUSE_TYPE:
                continue
            value = cause.get("message", "")
            if isinstance(value, str) and value.isascii() and value.isdigit() and int(value) <= 255:
                return CommandExited(int(value))
            return CommandFailed(f"error stream protocol error: invalid exit code value {_go_quote(str(value))}")
        return CommandFailed(f"error stream protocol error: no {EXIT_CODE_CAUSE_TYPE} cause given")
    message_text = status.get("message")
    return CommandFailed(message_text if isinstance(message_text, str) else "")


def outcome_status(outcome: CommandOutcome) -> dict:
    """The v5 error channel's Status for an outcome, as the stream translator writes it."""
    if isinstance(outcome, CommandSucceeded):
        return success_status()
    if isinstance(outcome, CommandExited):
        return translated_exit_status(outcome.exit_code)
    return internal_error_status(outcome.message)


# ---------------------------------------------------------------- terminal sizes


@dataclass(frozen=True)
class TerminalSize:
    width: int
    height: int

    def encode(self) -> bytes:
        """As client-go's json.Encoder writes it on the resize stream."""
        return b'{"Width":%d,"Height":%d}\n' % (self.width, self.height)


class TerminalSizeDecoder:
    """The resize channel's JSON values (a stream of them, as ``json.Decoder`` reads it),
    holding at most ``max_pending`` bytes of an unfinished value."""

    def __init__(self, max_pending: int = 4096) -> None:
        self._pending = ""
        self._max_pending = max_pending
        self._decoder = json.JSONDecoder()

    def feed(self, data: bytes) -> list[TerminalSize]:
        self._pending += data.decode("utf-8", "replace")
        sizes: list[TerminalSize] = []
        while True:
            text = self._pending.lstrip(" \t\r\n")
            if not text:
                self._pending = ""
                return sizes
            try:
                value, end = self._decoder.raw_decode(text)
            except ValueError:
                if len(text) > self._max_pending:
                    raise ChannelProtocolError(f"a terminal size over {self._max_pending} bytes") from None
                self._pending = text
                return sizes  # incomplete: wait for the rest
            self._pending = text[end:]
            sizes.append(_terminal_size(value))


def _terminal_size(value: Any) -> TerminalSize:
    if value is None:
        return TerminalSize(0, 0)
    if not isinstance(value, dict):
        raise ChannelProtocolError(f"a terminal size is a JSON object, not {json.dumps(value)[:64]}")
    fields: dict[str, Optional[int]] = {"width": 0, "height": 0}
    for key, item in value.items():  # encoding/json matches field names case-insensitively
        name = key.lower()
        if name not in fields:
            continue
        if item is None:
            continue
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= 0xFFFF:
            raise ChannelProtocolError(f"terminal size {key} {json.dumps(item)[:64]} is not a uint16")
        fields[name] = item
    return TerminalSize(fields["width"] or 0, fields["height"] or 0)
