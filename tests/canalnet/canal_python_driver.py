"""Drives PyPI's canal-python 0.4 (an independent canal client) for the canal server tests.

Runs as its own process (canal-python's package is named ``canal``, and its generated code needs
``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` with today's protobuf). Commands are JSON lines on
stdin, answers JSON lines on stdout: ``{"op": "connect", "host", "port", "user", "password"}``,
``{"op": "subscribe", "destination", "client_id", "filter"}``, ``{"op": "get", "size", "timeout"}``
(without ack), ``{"op": "ack", "id"}``, ``{"op": "rollback"}``, ``{"op": "close"}``. Each answer is
``{"ok": ...}`` or ``{"error": "..."}``; entries are decoded with canal-python's own classes.
"""

import hashlib
import json
import sys

from canal.client import Client
from canal.protocol import CanalProtocol_pb2, EntryProtocol_pb2


def scramble411(password: bytes, seed: bytes) -> bytes:
    # canal's SecurityUtil.scramble411, as canal's Java client computes the auth token
    s1 = hashlib.sha1(password).digest()
    s3 = hashlib.sha1(seed + hashlib.sha1(s1).digest()).digest()
    return bytes(a ^ b for a, b in zip(s3, s1, strict=True))


def column(c):
    return {
        "index": c.index,
        "sqlType": c.sqlType,
        "name": c.name,
        "isKey": c.isKey,
        "updated": c.updated,
        "isNull": c.isNull,
        "value": c.value,
        "mysqlType": c.mysqlType,
    }


def entry(e):
    h = e.header
    out = {
        "entryType": EntryProtocol_pb2.EntryType.Name(e.entryType),
        "logfileName": h.logfileName,
        "logfileOffset": h.logfileOffset,
        "executeTime": h.executeTime,
        "schemaName": h.schemaName,
        "tableName": h.tableName,
        "eventType": EntryProtocol_pb2.EventType.Name(h.eventType),
    }
    if e.entryType == EntryProtocol_pb2.EntryType.ROWDATA:
        rc = EntryProtocol_pb2.RowChange()
        rc.MergeFromString(e.storeValue)
        out.update(
            isDdl=rc.isDdl,
            sql=rc.sql,
            rows=[
                {"before": [column(c) for c in r.beforeColumns], "after": [column(c) for c in r.afterColumns]}
                for r in rc.rowDatas
            ],
        )
    return out


def main():
    out = sys.stdout
    sys.stdout = sys.stderr  # canal-python prints its progress; answers go to the real stdout
    client = Client()
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "connect":
                client.connector.connect(cmd["host"], cmd["port"])
                packet = CanalProtocol_pb2.Packet()
                packet.MergeFromString(client.connector.read_next_packet())
                shake = CanalProtocol_pb2.Handshake()
                shake.MergeFromString(packet.body)
                token = ""
                if cmd.get("password") is not None:
                    token = scramble411(cmd["password"].encode(), shake.seeds).hex()
                client.check_valid(cmd.get("user", "").encode(), token.encode())
                result = True
            elif op == "subscribe":
                client.subscribe(
                    cmd["client_id"].encode(), cmd["destination"].encode(), cmd["filter"].encode()
                )
                result = True
            elif op == "get":
                message = client.get_without_ack(cmd["size"], cmd.get("timeout", -1), cmd.get("unit", -1))
                result = {"id": message["id"], "entries": [entry(e) for e in message["entries"]]}
            elif op == "ack":
                client.ack(cmd["id"])
                result = True
            elif op == "rollback":
                client.rollback(0)
                result = True
            elif op == "close":
                client.disconnect()
                print(json.dumps({"ok": True}), file=out, flush=True)
                return
            print(json.dumps({"ok": result}), file=out, flush=True)
        except Exception as exc:  # the test reads the message
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), file=out, flush=True)


if __name__ == "__main__":
    main()
