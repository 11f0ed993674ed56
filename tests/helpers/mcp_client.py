"""A blocking MCP client for tests: the SDK's own `ClientSession` on a transport, driven
through a portal thread so that one session can serve a whole module's tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession
from mcp.types import CallToolResult, TextContent


@dataclass
class Tools:
    portal: BlockingPortal
    session: ClientSession

    def names(self) -> dict[str, Any]:
        """Each tool's name and its input schema."""
        listed = self.portal.call(self.session.list_tools)
        return {tool.name: tool.input_schema for tool in listed.tools}

    def call(self, name: str, /, **arguments: Any) -> CallToolResult:
        result = self.portal.call(partial(self.session.call_tool, name, arguments))
        assert isinstance(result, CallToolResult)
        return result

    def ok(self, name: str, /, **arguments: Any) -> dict[str, Any]:
        """The tool's structured answer; fails the test on a tool error."""
        result = self.call(name, **arguments)
        assert not result.is_error, _text(result)
        content: dict[str, Any] | None = result.structured_content
        assert content is not None
        return content

    def error(self, name: str, /, **arguments: Any) -> str:
        """The text of the tool error the call must end in."""
        result = self.call(name, **arguments)
        assert result.is_error, result.structured_content
        return _text(result)


def _text(result: CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


@contextmanager
def connected(transport: AbstractAsyncContextManager[Any]) -> Iterator[Tools]:
    """An initialized session over `transport` (the SDK's stdio or streamable HTTP client)."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(transport) as streams,
    ):
        read, write = streams[0], streams[1]
        session = portal.call(lambda: ClientSession(read, write))
        with portal.wrap_async_context_manager(session):
            portal.call(session.initialize)
            yield Tools(portal, session)
