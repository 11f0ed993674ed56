"""`atommem space push` and `space pull`: a space copied between this process's store and
another (a Qdrant server or a data directory). Only the stores are opened: no queues, no
journal; an embedded store a worker owns fails on first use with the store's own message."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import SecretStr
from qdrant_client.http.exceptions import ApiException
from tqdm import tqdm

from cli.context import setup
from common.errors import InvalidInput
from common.store import records
from common.store.backends import open_store
from common.store.base import Kind, Store, StoreError
from common.store.transfer import copy_space
from workers import runtime


def _other_store(args: argparse.Namespace, where: str) -> Store:
    """The store named on the command line: a Qdrant server for an http(s) URL (key from
    --api-key, else ATOMMEM_STORE__QDRANT_API_KEY), else an Edge store in a data directory
    (`DIR/qdrant`, as --data-dir lays it out, or DIR itself when it is a store directory)."""
    settings = runtime.settings()
    if where.startswith(("http://", "https://")):
        key = SecretStr(args.api_key) if args.api_key else settings.store.qdrant_api_key
        update: dict[str, object] = {"qdrant_url": where, "qdrant_api_key": key}
    else:
        from common.store.edge import MARKER  # the engine loads only for an Edge directory

        if args.api_key:
            raise InvalidInput("--api-key is for a Qdrant server URL (http:// or https://)")
        root = Path(where)
        path = root if (root / MARKER).exists() else root / "qdrant"
        update = {"qdrant_url": None, "qdrant_path": path}
    return open_store(settings.store.model_copy(update=update), settings.embedding.dimension)


def _transfer(args: argparse.Namespace, pushing: bool) -> int:
    """Copy a space between this process's store and the one named on the command line."""
    tenant = setup(args)
    settings = runtime.settings()
    # only the stores: no queues or journal. An embedded store a worker owns fails on first
    # use with the store's own message (StoreBusy).
    here = open_store(settings.store, settings.embedding.dimension)
    there = _other_store(args, args.to if pushing else args.source)
    source, target = (here, there) if pushing else (there, here)
    bars: dict[Kind, tqdm[None]] = {}

    def progress(kind: Kind, done: int, total: int) -> None:
        bar = bars.get(kind)
        if bar is None:
            bar = bars[kind] = tqdm(total=total, desc=kind.value, unit="pt", disable=args.quiet)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    try:
        report = copy_space(
            source, target, tenant, args.space, replace=args.replace, on_progress=progress
        )
    except ApiException as exc:  # the server store passes qdrant-client's errors through
        servers = " and ".join(s.location for s in (source, target) if "://" in s.location)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreError(
            f"the Qdrant server {servers} failed: {first}; check the URL and the API key"
        ) from None
    finally:
        for bar in bars.values():
            bar.close()
        try:
            there.close()
        finally:
            here.close()
    if report.cleared:
        print(f"cleared {report.cleared} points an interrupted copy left", file=sys.stderr)
    copied = ", ".join(f"{report.copied[k]} {k.value}" for k in records.SPACE_KINDS.values())
    verb = "replaced" if report.replaced else "copied"
    print(f"{verb} space {args.space!r} at {target.location} from {source.location}: {copied}")
    return 0


def cmd_space_push(args: argparse.Namespace) -> int:
    """Copy a space from this process's store to --to (a Qdrant URL or a data directory)."""
    return _transfer(args, pushing=True)


def cmd_space_pull(args: argparse.Namespace) -> int:
    """Copy a space from --from (a Qdrant URL or a data directory) into this process's store."""
    return _transfer(args, pushing=False)
