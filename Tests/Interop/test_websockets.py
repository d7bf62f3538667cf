"""The WebSocket server against Python `websockets` (a client nobody here wrote) and raw frames."""
import asyncio
import os
import socket
import struct

import pytest
import websockets


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


def test_echo_text_binary_and_large(server):
    async def scenario():
        async with websockets.connect(server.ws + "/echo/ws", max_size=None) as ws:
            await ws.send("héllo 👋")
            assert await ws.recv() == "héllo 👋"
            await ws.send(b"\x00\xff" * 50000)
            assert await ws.recv() == b"\x00\xff" * 50000
            big = os.urandom(5 << 20)
            await ws.send(big)
            assert await ws.recv() == big
            # A fragmented message (websockets fragments an async iterator).
            async def parts():
                for piece in ["frag", "ment", "ed ✓"]:
                    yield piece
            await ws.send(parts())
            assert await ws.recv() == "fragmented ✓"
            pong = await ws.ping(b"are you there")
            await asyncio.wait_for(pong, 5)
        assert ws.close_code == 1000
    run(scenario())


def test_many_concurrent_clients(server):
    async def one(index):
        async with websockets.connect(server.ws + "/echo/ws") as ws:
            for round_ in range(20):
                message = f"client {index} round {round_}"
                await ws.send(message)
                assert await ws.recv() == message
    async def scenario():
        await asyncio.gather(*(one(i) for i in range(50)))
    run(scenario())


def test_broadcast_reaches_every_client(server):
    async def scenario():
        clients = [await websockets.connect(server.ws + "/echo/broadcast") for _ in range(10)]
        await clients[3].send("hello all")
        for client in clients:
            assert await asyncio.wait_for(client.recv(), 5) == "hello all"
        for client in clients:
            await client.close()
    run(scenario())


def test_message_over_the_limit_closes_1009(server):
    async def scenario():
        # Not `async with`: websockets' own close path trips over the aborted 16 MiB write.
        ws = await websockets.connect(server.ws + "/echo/ws", max_size=None)
        with pytest.raises(websockets.ConnectionClosedError):
            await ws.send(b"z" * ((16 << 20) + 1))
            await ws.recv()
        assert ws.close_code == 1009
        assert "exceeds" in ws.close_reason
    run(scenario())


def raw_upgrade(server, path="/echo/ws"):
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101")
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head
    return sock


def masked_frame(opcode, payload, fin=True, key=b"\x01\x02\x03\x04"):
    header = bytes([(0x80 if fin else 0) | opcode])
    if len(payload) < 126:
        header += bytes([0x80 | len(payload)])
    elif len(payload) < 65536:
        header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
    else:
        header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
    return header + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_close_code(sock):
    data = b""
    while True:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    index = data.find(b"\x88")
    assert index >= 0, f"no close frame in {data!r}"
    return struct.unpack(">H", data[index + 2:index + 4])[0]


@pytest.mark.parametrize("name,frames,code", [
    ("invalid UTF-8", [masked_frame(1, b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited")], 1007),
    ("invalid UTF-8 across fragments", [masked_frame(1, b"ok \xf0\x9f", fin=False), masked_frame(0, b"\x28")], 1007),
    ("continuation without a start", [masked_frame(0, b"x")], 1002),
    ("new message inside a fragmented one", [masked_frame(1, b"a", fin=False), masked_frame(1, b"b")], 1002),
    ("reserved opcode", [masked_frame(3, b"")], 1002),
    ("bad close code", [masked_frame(8, struct.pack(">H", 1005))], 1002),
    ("one-byte close payload", [masked_frame(8, b"\x03")], 1002),
    ("close reason not UTF-8", [masked_frame(8, struct.pack(">H", 1000) + b"\xff")], 1007),
    ("unmasked client frame", [bytes([0x81, 0x01]) + b"x"], 1002),
])
def test_protocol_violations_close_with_the_right_code(server, name, frames, code):
    sock = raw_upgrade(server)
    for frame in frames:
        sock.sendall(frame)
    assert read_close_code(sock) == code, name
    sock.close()


def test_close_handshake_echoes_the_code(server):
    sock = raw_upgrade(server)
    sock.sendall(masked_frame(8, struct.pack(">H", 4000) + b"bye"))
    assert read_close_code(sock) == 4000
    sock.close()


def test_sigterm_closes_websockets_with_1001_and_exits_0(fresh_server):
    async def scenario():
        async with websockets.connect(fresh_server.ws + "/echo/ws") as ws:
            await ws.send("before")
            assert await ws.recv() == "before"
            fresh_server.process.send_signal(15)
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1001
    run(scenario())
    assert fresh_server.process.wait(timeout=15) == 0
    output = fresh_server.process.stdout.read()
    assert "Stopped." in output
