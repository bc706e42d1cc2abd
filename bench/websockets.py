"""WebSocket messages per second through a Durable Object that hibernates its sockets.

The object is tests/projects/websockets' `WorkflowStatus` (/ws): it accepted the socket with
`ctx.acceptWebSocket`, and its `webSocketMessage` answers each binary message with the bytes
reversed. Two measures against a server already running (celld run or wrangler dev on that
project): *round trips* (send, wait for the answer, N times) and *pipelined* (send N, then
read the N answers), each on C clients of one object at once. Run it as a module (the
file name would shadow the `websockets` package as a script):

    python -m bench.websockets --url http://127.0.0.1:8787 -n 2000 -c 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from websockets.asyncio.client import ClientConnection, connect


async def answer(ws: ClientConnection) -> None:
    """The next binary answer (the object also broadcasts text: hellos, leavers)."""
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            assert message == bytes([3, 2, 1]), message
            return


async def client(url: str, n: int, pipelined: bool) -> None:
    async with connect(url) as ws:
        payload = bytes([1, 2, 3])
        if pipelined:
            for _ in range(n):
                await ws.send(payload)
            for _ in range(n):
                await answer(ws)
        else:
            for _ in range(n):
                await ws.send(payload)
                await answer(ws)


async def measure(base: str, n: int, clients: int, pipelined: bool, room: str) -> float:
    url = base.replace("http://", "ws://") + f"/ws?instanceId={room}&name=bench"
    started = time.perf_counter()
    await asyncio.gather(*(client(url, n, pipelined) for _ in range(clients)))
    return n * clients / (time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("-n", type=int, default=2000, help="messages per client")
    parser.add_argument("-c", type=int, default=1, help="clients (one object)")
    args = parser.parse_args()
    room = f"bench-{time.time_ns()}"
    await measure(args.url, 50, 1, False, room)  # warm: the isolates exist
    rounds = await measure(args.url, args.n, args.c, False, room + "-r")
    pipelined = await measure(args.url, args.n, args.c, True, room + "-p")
    result = {
        "round_trips_per_s": round(rounds, 1),
        "pipelined_per_s": round(pipelined, 1),
        "n": args.n,
        "clients": args.c,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
