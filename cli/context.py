"""What every local command needs: settings from the global flags, the store, a producer.

With no broker configured the producer comes with an embedded worker in this process; with
`ATOMMEM_BROKER__URL` set it sends to the Redis queues.
"""

from __future__ import annotations

import argparse
import atexit
from pathlib import Path

from common.celery_config import celery_config
from common.memory.context import MemoryContext
from common.producer import MemoryClient
from common.settings import Settings, get_settings
from workers import runtime


def settings_from(args: argparse.Namespace) -> Settings:
    settings: Settings = get_settings()
    if args.data_dir:
        settings = settings.in_data_dir(Path(args.data_dir))
    return settings


def setup(args: argparse.Namespace) -> str:
    settings = settings_from(args)
    runtime.configure(settings)
    atexit.register(runtime.reset)
    return str(args.tenant or settings.tenant)


def context() -> MemoryContext:
    """The store, opened by this process (embedded mode, or a Qdrant server)."""
    return runtime.context()


def store_reachable() -> bool:
    """Whether this command may open the store itself (not while workers own a local one)."""
    settings = runtime.settings()
    return settings.broker.url is None or settings.store.qdrant_url is not None


def producer() -> MemoryClient:
    """A producer client; in embedded mode, also the in-process worker (resuming the journal)."""
    from workers.celery_app import app

    if runtime.settings().broker.url is None:
        from workers.embedded import EmbeddedWorker

        worker = EmbeddedWorker()
        worker.start()
        atexit.register(worker.stop)
    else:
        app.conf.update(celery_config(runtime.settings()))
    coord = runtime.coordination()
    return MemoryClient(app, coord.jobs, coord.sequence)
