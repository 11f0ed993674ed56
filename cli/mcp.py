"""`atommem mcp`: the MCP server on stdio. It serves the local store (an embedded worker in
this process, or the queues with `ATOMMEM_BROKER__URL`), or a running server through the SDK
when `ATOMMEM_API__URL` and `ATOMMEM_API__KEY` are set. Stdout carries the protocol alone."""

from __future__ import annotations

import argparse
import contextlib
import sys

from cli.context import memory
from common.errors import InvalidInput


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools on stdin and stdout until the client closes them."""
    try:
        # Imported here, not with the CLI: the SDK comes with the `api` extra, which an image
        # running the other commands may lack, and it takes a second to import.
        from api.mcp.server import MemoryServer
    except ModuleNotFoundError as exc:
        raise InvalidInput(
            f"`atommem mcp` needs the `api` extra ({exc.name} is missing): "
            "pip install 'atommem[api]'"
        ) from None
    # Whatever starting the store or worker prints goes to stderr; once serving, the SDK
    # points file descriptor 1 at stderr itself and writes the protocol to a copy of it.
    with contextlib.redirect_stdout(sys.stderr):
        served = memory(args)
    MemoryServer(lambda _ctx: served).run("stdio")
    return 0
