"""Redis-only routes while one tenant's questions wait on a query queue nobody consumes.

    python -m bench.api_saturation --out bench/results/api_saturation.json

The API (uvicorn) on a private `redis-server` with no worker: tenant alpha sends `--waiting`
searches, which wait until the query timeout; once they are queued, tenant beta's
`GET /v1/jobs`, `GET /v1/jobs/{id}`, MCP `tools/list` and `/healthz` are each timed `--probes`
times, one after another. The floor is the same probes with nothing waiting, in the same run.
The per-tenant share is raised to `--waiting` so that every search really waits.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.fairness import private_redis
from bench.metrics import percentiles
from workers.launch import ROOT

ADMIN = "bench-admin-key"
MCP_ACCEPT = "application/json, text/event-stream"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _probes(url: str, key: str) -> dict[str, Callable[[], httpx.Response]]:
    auth = {"Authorization": f"Bearer {key}"}
    tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    return {
        "GET /v1/jobs": lambda: httpx.get(f"{url}/v1/jobs", headers=auth, timeout=300),
        "GET /v1/jobs/{id}": lambda: httpx.get(f"{url}/v1/jobs/nope", headers=auth, timeout=300),
        "MCP tools/list": lambda: httpx.post(
            f"{url}/mcp", headers={**auth, "Accept": MCP_ACCEPT}, json=tools, timeout=300
        ),
        "GET /healthz": lambda: httpx.get(f"{url}/healthz", timeout=300),
    }


def _timed(probes: dict[str, Callable[[], httpx.Response]], count: int) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, probe in probes.items():
        ms, statuses = [], set()
        for _ in range(count):
            start = time.perf_counter()
            statuses.add(probe().status_code)
            ms.append((time.perf_counter() - start) * 1000)
        out[name] = {"ms": percentiles(ms), "statuses": sorted(statuses)}
    return out


def run(args: argparse.Namespace, directory: Path, redis_url: str) -> dict[str, object]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(
        os.environ,
        ATOMMEM_BROKER__URL=redis_url,
        ATOMMEM_API__ADMIN_KEY=ADMIN,
        ATOMMEM_API__WAITS_PER_TENANT=str(args.waiting),
    )
    command = [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app"]
    command += ["--port", str(port), "--log-level", "warning"]
    with (directory / "api.log").open("wb") as log:
        api = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"})
        keys = {}
        for tenant in ("alpha", "beta"):
            admin.post("/v1/admin/tenants", json={"name": tenant})
            keys[tenant] = admin.post(f"/v1/admin/tenants/{tenant}/keys").json()["api_key"]
        probes = _probes(url, keys["beta"])
        floor = _timed(probes, args.probes)
        pool = ThreadPoolExecutor(args.waiting)

        def search() -> int:
            return httpx.post(
                f"{url}/v1/spaces/notes/search",
                json={"question": "What did Ann adopt?"},
                headers={"Authorization": f"Bearer {keys['alpha']}"},
                timeout=300,
            ).status_code

        flood: list[Future[int]] = [pool.submit(search) for _ in range(args.waiting)]
        time.sleep(args.settle_s)  # every search sent and waiting on its reply
        waiting_at_start = sum(not f.done() for f in flood)
        loaded = _timed(probes, args.probes)
        waiting_at_end = sum(not f.done() for f in flood)
        ready = httpx.get(f"{url}/readyz", timeout=30)
        searches = Counter(f.result() for f in flood)
        return {
            "waiting_searches": args.waiting,
            "waiting_when_probed": [waiting_at_start, waiting_at_end],
            "floor": floor,
            "while_waiting": loaded,
            "readyz_while_waiting": ready.status_code,
            "search_statuses": {str(k): v for k, v in sorted(searches.items())},
        }
    finally:
        api.terminate()
        api.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=45)
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--settle-s", type=float, default=3.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="atommem-saturation-") as tmp:
        directory = Path(tmp)
        with private_redis(directory) as redis_url:
            out = run(args, directory, redis_url)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
