"""canal's wire protocol: framing, packets, the password scramble, the generated message classes.

Framing (canal's ``NettyUtils``/``FixedHeaderFrameDecoder``): every packet is a 4-byte big-endian
length, then that many bytes of a ``Packet`` message (``CanalProtocol.proto``), whose ``body`` holds
the typed message (``Handshake``, ``ClientAuth``, ``Sub``, ``Get``, ``Messages``, ``Ack``, ...).

A session, as canal's server runs it::

    server -> HANDSHAKE(version=1, Handshake{seeds: 8 random bytes})
    client -> CLIENTAUTHENTICATION(ClientAuth{username, password: hex(scramble411(pw, seed))})
    server -> ACK(Ack{})                            or ACK(Ack{error_code: 400, ...})
    client -> SUBSCRIPTION(Sub{destination, client_id, filter})       server -> ACK
    client -> GET(Get{destination, client_id, fetch_size, timeout?, unit?})
    server -> MESSAGES(Messages{batch_id, messages: [Entry bytes]})   batch_id -1: nothing now
    client -> CLIENTACK(ClientAck{batch_id})          no answer (an error answers ACK with a code)
    client -> CLIENTROLLBACK(ClientRollback{batch_id: 0 = all}) no answer
    client -> UNSUBSCRIPTION(Unsub{...})                               server -> ACK

The generated modules come from ``_pb`` (written by the wheel build or an editable install) or,
failing that, are generated once into a cache directory (``$BINLOG_CDC_CACHE_DIR`` or
``~/.cache/airflow-provider-binlog``) with ``grpc_tools``; see :mod:`.generate`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import struct
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from airflow_provider_binlog.canalnet.errors import CanalProtocolError
from airflow_provider_binlog.errors import ConfigurationError

VERSION = 1
"""``Packet.version`` canal's server writes (its Java client refuses any other)."""
MAX_FRAME = 64 * 1024 * 1024
"""Largest frame accepted: a longer length is a broken or hostile peer."""
_LEN = struct.Struct(">i")


def _load_generated() -> tuple[ModuleType, ModuleType]:
    try:
        from airflow_provider_binlog.canalnet._pb import (
            CanalProtocol_pb2,
            EntryProtocol_pb2,
        )

        return CanalProtocol_pb2, EntryProtocol_pb2
    except ImportError:
        pass
    import google.protobuf

    from airflow_provider_binlog.canalnet import generate as gen

    digest = hashlib.sha256(google.protobuf.__version__.encode())
    for name in gen.PROTO_FILES:
        digest.update((gen.PROTO_DIR / name).read_bytes())
    from airflow_provider_binlog import settings

    base = settings.current().cache_dir or os.path.join(
        os.path.expanduser("~"), ".cache", "airflow-provider-binlog"
    )
    out = Path(base) / f"canalnet-pb-{digest.hexdigest()[:16]}"
    if not all((out / f"{m}.py").exists() for m in gen.MODULES):
        try:
            tmp = out.with_name(out.name + f".tmp{os.getpid()}")
            gen.generate(tmp)
            os.replace(tmp, out) if not out.exists() else None
        except (RuntimeError, OSError) as exc:
            raise ConfigurationError(
                "canal's protobuf modules are missing (an install without the build step) and cannot be "
                f"generated: {exc}; install grpcio-tools or reinstall the package"
            ) from exc
    mods = []
    for name in gen.MODULES:
        full = f"airflow_provider_binlog.canalnet._pb_cache.{name}"
        spec = importlib.util.spec_from_file_location(full, out / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[full] = mod
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[0], mods[1]


pb, entry_pb = _load_generated()
"""``CanalProtocol_pb2`` and ``EntryProtocol_pb2``."""


# --------------------------------------------------------------------------- authentication


def scramble_gen_pass(password: bytes) -> str:
    """What a canal server keeps: hex of SHA1(SHA1(password)) (canal's ``SecurityUtil.scrambleGenPass``)."""
    return hashlib.sha1(hashlib.sha1(password).digest()).hexdigest()


def scramble411(password: bytes, seed: bytes) -> bytes:
    """The client's answer to a seed (MySQL's native scramble): SHA1(pw) XOR SHA1(seed + SHA1(SHA1(pw)))."""
    stage1 = hashlib.sha1(password).digest()
    stage2 = hashlib.sha1(stage1).digest()
    mix = hashlib.sha1(seed + stage2).digest()
    return bytes(a ^ b for a, b in zip(mix, stage1, strict=True))


def scramble_check(token: bytes, stored: bytes, seed: bytes) -> bool:
    """Server side (``SecurityUtil.scrambleServerAuth``): ``stored`` is SHA1(SHA1(pw)); the token
    XOR SHA1(seed + stored) must be SHA1(pw), whose SHA1 is ``stored``."""
    if len(token) != 20 or len(stored) != 20:
        return False
    mix = hashlib.sha1(seed + stored).digest()
    stage1 = bytes(a ^ b for a, b in zip(token, mix, strict=True))
    return hashlib.sha1(stage1).digest() == stored


# --------------------------------------------------------------------------- framing


def read_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes, or :class:`EOFError` when the peer closed first (the socket's timeout bounds
    each read)."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("the peer closed the connection")
        buf += chunk
    return bytes(buf)


def read_packet(sock: socket.socket) -> Any:
    """The next framed ``Packet``."""
    (length,) = _LEN.unpack(read_exact(sock, 4))
    if length < 0 or length > MAX_FRAME:
        raise CanalProtocolError(f"frame length {length} out of range (0..{MAX_FRAME})")
    packet = pb.Packet()
    packet.ParseFromString(read_exact(sock, length))
    return packet


def frame(packet: Any) -> bytes:
    """A ``Packet`` with its length prefix."""
    data = packet.SerializeToString()
    return _LEN.pack(len(data)) + data


def packet(kind: int, body: Any = None) -> Any:
    """A ``Packet`` of type ``kind`` (canal's server sets ``version`` 1 on everything it sends)."""
    msg = pb.Packet(type=kind, version=VERSION)
    if body is not None:
        msg.body = body if isinstance(body, bytes) else body.SerializeToString()
    return msg


def ack_packet(code: int = 0, message: str = "") -> Any:
    """An ``ACK`` packet; with a code it is canal's error answer (``NettyUtils.errorPacket``)."""
    body = pb.Ack(error_code=code, error_message=message) if code else pb.Ack()
    return packet(pb.ACK, body)
