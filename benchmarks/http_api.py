"""The HTTP API's cost: ``assemble`` and ``grep`` through ``lcm serve`` on loopback versus in-process, same run.

A store holds one conversation (the bundled sample session, compacted so the context mixes summaries
and raw messages). Baselines: ``engine.assemble`` and ``engine.grep`` in this process. Measured:
``POST /v1/assemble`` and ``POST /v1/grep`` with the same arguments, against ``lcm serve`` running
as its own process on 127.0.0.1 (one keep-alive connection, one request at a time), then with
several clients at once for throughput. Figures: p50 and p99 latency, and requests per second.
The grep is a regex over messages and summaries (trigram-prefiltered), 20 matches at most; over
HTTP it also renders the agent's text, as the tool does.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import SAMPLE, Figure, parse_args, report
from lossless import ContextEngine

BUDGET = 16_000
SESSION = "bench-http"
PATTERN = r"rollover|limits\.toml"


@dataclass(frozen=True)
class Operation:
    """One engine call and the HTTP request that makes it."""

    name: str
    path: str
    body: dict[str, Any]
    call: Callable[[ContextEngine], Awaitable[Any]]


OPERATIONS = (
    Operation(
        "assemble",
        "/v1/assemble",
        {"session_id": SESSION, "token_budget": BUDGET},
        lambda engine: engine.assemble(SESSION, token_budget=BUDGET),
    ),
    Operation("grep", "/v1/grep", {"pattern": PATTERN, "limit": 20}, lambda engine: engine.grep(PATTERN, limit=20)),
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def prepare(url: str) -> None:
    async with await ContextEngine.open(url) as engine:
        result = await engine.bootstrap(SAMPLE, session_id=SESSION)
        await engine.compact(SESSION, target_tokens=BUDGET // 2)
        hits = len((await engine.grep(PATTERN, limit=20)).hits)
        print(f"store: {result.stored} messages of {SAMPLE.name}, compacted to fit {BUDGET // 2} tokens; "
              f"grep {PATTERN!r} finds {hits}")  # fmt: skip


async def in_process(url: str, op: Operation, calls: int) -> list[float]:
    async with await ContextEngine.open(url) as engine:
        await op.call(engine)  # warm: caches, connections
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            await op.call(engine)
            times.append(time.perf_counter() - start)
        return times


def over_http(base: str, op: Operation, calls: int) -> list[float]:
    with httpx.Client(base_url=base, timeout=30) as client:
        client.post(op.path, json=op.body).raise_for_status()
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            client.post(op.path, json=op.body).raise_for_status()
            times.append(time.perf_counter() - start)
        return times


async def throughput_http(base: str, op: Operation, calls: int, clients: int) -> float:
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def worker(n: int) -> None:
            for _ in range(n):
                (await client.post(op.path, json=op.body)).raise_for_status()

        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(clients):
                group.start_soon(worker, calls // clients)
        return (calls // clients * clients) / (time.perf_counter() - start)


async def throughput_in_process(url: str, op: Operation, calls: int, clients: int) -> float:
    async with await ContextEngine.open(url) as engine:

        async def worker(n: int) -> None:
            for _ in range(n):
                await op.call(engine)

        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(clients):
                group.start_soon(worker, calls // clients)
        return (calls // clients * clients) / (time.perf_counter() - start)


def start_server(url: str, port: int) -> subprocess.Popen[bytes]:
    lcm = Path(sys.executable).with_name("lcm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCM_")}
    server = subprocess.Popen(
        [str(lcm), "--database", url, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("lcm serve did not start")


def figures_for(op: Operation, url: str, base: str, calls: int, clients: int) -> list[Figure]:
    local = anyio.run(in_process, url, op, calls)
    remote = over_http(base, op, calls)
    local_rps = anyio.run(throughput_in_process, url, op, calls, clients)
    remote_rps = anyio.run(throughput_http, base, op, calls, clients)
    ms = 1000.0
    n = op.name
    return [
        Figure(f"{n} p50, HTTP (in-process = baseline)", statistics.median(remote) * ms, "ms",
               statistics.median(local) * ms),
        Figure(f"{n} p99, HTTP (in-process = baseline)", percentile(remote, 0.99) * ms, "ms",
               percentile(local, 0.99) * ms),
        Figure(f"{n} req/s, 1 client, HTTP", 1 / statistics.mean(remote), "r/s", 1 / statistics.mean(local)),
        Figure(f"{n} req/s, {clients} clients, HTTP", remote_rps, "r/s", local_rps,
               note="lcm serve is one process (one event loop); the baseline is the same calls in-process"),
    ]  # fmt: skip


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    calls = 200 if args.quick else 2000
    clients = 8
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.db'}"
        anyio.run(prepare, url)
        port = free_port()
        server = start_server(url, port)
        base = f"http://127.0.0.1:{port}"
        try:
            figures = [figure for op in OPERATIONS for figure in figures_for(op, url, base, calls, clients)]
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(10)
    report(f"HTTP API: assemble and grep through lcm serve vs in-process ({calls} calls each)", figures, args.json)


if __name__ == "__main__":
    main()
