"""What every command needs: settings from the global flags, and the tenant's `Memory`.

A command reads and writes memory through one `Memory`: a server through the SDK when
`ATOMMEM_API__URL` is set (the tenant is the key's), else this machine's producer as a
`TenantMemory`, with an embedded worker in this process when no broker is configured or the
Redis queues with `ATOMMEM_BROKER__URL`. Only what truly needs the store (copying a space,
comparing two, the benchmarks) opens it, with `context()`.
"""

from __future__ import annotations

import argparse
import atexit
import sys
from pathlib import Path

from common.celery_config import celery_config
from common.context import MemoryContext
from common.errors import InvalidInput
from common.models.jobs import Job
from common.producer import Producer
from common.service import Memory, TenantMemory
from common.settings import Settings, get_settings
from workers import runtime


def settings_from(args: argparse.Namespace) -> Settings:
    settings: Settings = get_settings()
    if args.data_dir:
        settings = settings.in_data_dir(Path(args.data_dir))
    return settings


def setup(args: argparse.Namespace) -> str:
    """Configure this process from the flags for a command that runs on this machine's store
    or queues (refused while a server is named); the tenant the command acts for."""
    if get_settings().api.url:
        raise InvalidInput(
            f"`atommem {command_name(args)}` runs against the store or queues, not a server: "
            "unset ATOMMEM_API__URL"
        )
    settings = settings_from(args)
    runtime.configure(settings)
    atexit.register(runtime.reset)
    return str(args.tenant or settings.tenant)


def memory(args: argparse.Namespace) -> Memory:
    """The tenant's memory: a server's through the SDK, or this machine's."""
    settings = get_settings()
    if not settings.api.url:
        return local(args)
    if settings.api.key is None:
        raise InvalidInput("ATOMMEM_API__URL is set: also set ATOMMEM_API__KEY (a tenant's key)")
    from api.client import AtomMem  # the SDK comes with the `api` extra

    remote = AtomMem(str(settings.api.url), settings.api.key.get_secret_value())
    atexit.register(remote.close)
    return remote


def local(args: argparse.Namespace) -> TenantMemory:
    """The tenant's memory through this machine's producer, for the commands that run only
    here (job retry, resume, profile-batch, space rebuild)."""
    tenant = setup(args)
    return TenantMemory(producer(), tenant, runtime.settings().api)


def command_name(args: argparse.Namespace) -> str:
    return " ".join(str(part) for part in (args.command, getattr(args, "action", None)) if part)


def context() -> MemoryContext:
    """The store, opened by this process (embedded mode, or a Qdrant server)."""
    return runtime.context()


def store_reachable() -> bool:
    """Whether this command may open the store itself (not while workers own a local one)."""
    settings = runtime.settings()
    return settings.broker.url is None or settings.store.qdrant_url is not None


def embedded() -> bool:
    """Whether the task graph runs in this process (no broker configured)."""
    return runtime.settings().broker.url is None


def warm(memory: Memory) -> None:
    """Load the embedding model now where this process runs the work: rates then measure
    the work, not the model's loading."""
    if isinstance(memory, TenantMemory) and embedded():
        context().embedder.encode([])


def resume_open(memory: Memory) -> list[Job]:
    """In embedded mode, send again the jobs an interrupted run left unfinished (the queues
    keep a broker's work, and a server's is its own)."""
    if not isinstance(memory, TenantMemory) or not embedded():
        return []
    jobs = memory.producer.resend_open()
    if jobs:
        print(f"resuming {len(jobs)} unfinished jobs of an interrupted run", file=sys.stderr)
    return jobs


def producer() -> Producer:
    """A producer; in embedded mode, also the in-process worker (resuming the journal)."""
    from workers.celery_app import app

    if embedded():
        from workers.embedded import EmbeddedWorker

        worker = EmbeddedWorker()
        worker.start()
        atexit.register(worker.stop)
    else:
        app.conf.update(celery_config(runtime.settings()))
    coord = runtime.coordination()
    return Producer(app, coord.jobs, coord.sequence)
