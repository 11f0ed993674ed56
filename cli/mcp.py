"""`atommem mcp`: the MCP server on stdio. It serves the local store (an embedded worker in
this process, or the queues with `ATOMMEM_BROKER__URL`), or a running server through the SDK
when `ATOMMEM_API__URL` and `ATOMMEM_API__KEY` are set. Stdout carries the protocol alone."""

from __future__ import annotations

import argparse
import contextlib
import sys

from cli.context import producer, setup
from common.errors import InvalidInput
from common.settings import get_settings
from workers import runtime


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools on stdin and stdout until the client closes them."""
    try:
        # Imported here, not with the CLI: the SDK comes with the `api` extra, which an image
        # running the other commands may lack, and it takes a second to import.
        from api.client import AtomMem
        from api.mcp.memory import Memory, ProducerMemory
        from api.mcp.server import MemoryServer
    except ModuleNotFoundError as exc:
        raise InvalidInput(
            f"`atommem mcp` needs the `api` extra ({exc.name} is missing): "
            "pip install 'atommem[api]'"
        ) from None
    settings = get_settings()
    # Whatever starting the store or worker prints goes to stderr; once serving, the SDK
    # points file descriptor 1 at stderr itself and writes the protocol to a copy of it.
    with contextlib.redirect_stdout(sys.stderr):
        served: Memory
        if settings.api.url:
            if settings.api.key is None:
                raise InvalidInput(
                    "ATOMMEM_API__URL is set: also set ATOMMEM_API__KEY (a tenant's key)"
                )
            served = AtomMem(settings.api.url, settings.api.key.get_secret_value())
        else:
            tenant = setup(args)
            served = ProducerMemory(producer(), tenant, runtime.settings().api)
    MemoryServer(lambda _ctx: served).run("stdio")
    return 0
