"""A Python `websockets` server for testing Parley's Swift WebSocket client.

Prints its port on the first line of stdout, then serves until killed:
- every text or binary message is echoed;
- the text "fragment" is answered with a message sent in three fragments;
- the text "ping" makes the server ping the client and answer "pong-received" once the
  client's automatic pong arrives;
- the text "close" makes the server close with code 4001 and reason "bye".
"""
import asyncio
import signal
import sys

from websockets.asyncio.server import serve


async def handler(ws):
    async for message in ws:
        if message == "fragment":
            async def parts():
                for piece in ["frag", "ment", "ed ✓"]:
                    yield piece
            await ws.send(parts())
        elif message == "ping":
            pong = await ws.ping(b"from-python")
            await asyncio.wait_for(pong, 5)
            await ws.send("pong-received")
        elif message == "close":
            await ws.close(4001, "bye")
        else:
            await ws.send(message)


async def main():
    # A parent that spawned us from a thread with signals blocked (Swift's Process does) would
    # otherwise be unable to stop us with SIGTERM.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    loop = asyncio.get_running_loop()
    stdin_closed = loop.create_future()
    # Exit when the parent closes our stdin (or dies): no orphan servers.
    loop.add_reader(sys.stdin.fileno(), lambda: stdin_closed.done() or (
        sys.stdin.buffer.read1(1) or stdin_closed.set_result(None)))
    async with serve(handler, "127.0.0.1", 0, max_size=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        print(port, flush=True)
        await stdin_closed


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
