"""`atommem serve`: the HTTP API (with `/mcp` and `/ui`) over the embedded store and the
in-process task graph, in one process, with no Redis: what `pip install` and one command give.

Keys live in a SQLite file beside the store (`api.auth.LocalKeys`). On the first start the
settings' tenant is created with a key, which is printed and written to a file only its owner
can read; later starts read that file and say where it is. Jobs an interrupted run left
unfinished are sent again on start, as `atommem resume` does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from api.auth import Keys, LocalKeys
from api.capacity import WaitSlots
from api.deps import Services
from cli.context import settings_from
from common.producer import Producer
from common.settings import Settings

KEYS_FILE = "keys.sqlite"
KEY_FILE = "api_key"  # the first tenant's key, readable by its owner only


def data_root(settings: Settings) -> Path:
    """The directory the embedded store's journal lives in (a command's `--data-dir`)."""
    return settings.pipeline.coordination_path.parent


def local_services(settings: Settings) -> Services:
    """The routes' services over this process's embedded worker and store."""
    from workers import runtime
    from workers.celery_app import app
    from workers.embedded import EmbeddedWorker
    from workers.wiring import model_budgets

    if settings.broker.url:
        raise RuntimeError(
            "`atommem serve` runs the work in its own process: unset ATOMMEM_BROKER__URL, or "
            "run the API under uvicorn with workers (docs/operations.md)"
        )
    runtime.configure(settings)
    worker = EmbeddedWorker()
    worker.start()
    coord = runtime.coordination()
    producer = Producer(app, coord.jobs, coord.sequence)
    resent = producer.resend_open()
    if resent:
        print(f"resuming {len(resent)} unfinished jobs of an interrupted run", file=sys.stderr)
    admin = settings.api.admin_key.get_secret_value() if settings.api.admin_key else None
    keys = LocalKeys(data_root(settings) / KEYS_FILE, admin)
    budgets = model_budgets(settings)

    def close() -> None:
        worker.stop()
        keys.close()
        runtime.reset()  # saves the changed indexes, closes the store and the journal

    return Services(
        settings=settings,
        keys=keys,
        producer=producer,
        slots=WaitSlots(settings.api),
        model_counters=budgets.counters,
        close=close,
    )


def first_key(keys: Keys, tenant: str, key_file: Path) -> str:
    """Where the caller finds a key: on the first start (no tenant yet) the tenant is created
    with a new key, written to `key_file` (mode 0600) and shown; later, the file's path."""
    if keys.tenants():
        if key_file.exists():
            return f"the key of tenant {tenant!r} is in {key_file}"
        return "keys exist already; manage them with the admin key (ATOMMEM_API__ADMIN_KEY)"
    keys.create_tenant(tenant)
    key = str(keys.create_key(tenant)["api_key"])
    key_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key + "\n")
    return f"tenant {tenant!r} created; its key (also in {key_file}):\n  {key}"


def serve(settings: Settings, host: str, port: int) -> None:
    """Run the API over the embedded store until interrupted."""
    import uvicorn

    from api.main import create_app

    def services(cfg: Settings) -> Services:
        built = local_services(cfg)
        note = first_key(built.keys, cfg.tenant, data_root(cfg) / KEY_FILE)
        print(f"AtomMem at http://{host}:{port} (inspector: /ui, MCP: /mcp)\n{note}", flush=True)
        return built

    uvicorn.run(create_app(settings, services), host=host, port=port, log_level="warning")


def cmd_serve(args: argparse.Namespace) -> int:
    serve(settings_from(args), args.host, args.port)
    return 0
