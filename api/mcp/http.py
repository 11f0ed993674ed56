"""The MCP server's streamable HTTP transport on the API (`/mcp`), behind the API's keys: a
request is authenticated as on the routes, and its tools act for the key's tenant."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import anyio.to_thread
import redis.exceptions
from fastapi import HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from api.deps import caller, services, tenant
from api.errors import RETRY_AFTER_S, reply
from api.mcp.server import MemoryServer
from common.service import Memory

# The ASGI scope key the gate sets to the caller's tenant; the tools read it from the HTTP
# request their message came in, so each call acts for its own request's key.
TENANT = "atommem.tenant"
_bearer = HTTPBearer(auto_error=False)
KEY_HEADER = "X-API-Key"  # the key for clients that cannot send a bearer header


def tenant_memory(ctx: Context) -> Memory:
    """The memory of the tenant whose key sent this tool call; each of its waits on a worker
    holds one of the tenant's slots, as the routes' do."""
    request = ctx.request_context.request
    if not isinstance(request, Request) or not isinstance(name := request.scope.get(TENANT), str):
        raise RuntimeError("an MCP request reached the tools without passing the key gate")
    return services(request).memory(name)


class McpEndpoint:
    """The ASGI app at `/mcp`: the caller's key is checked (401 without a known key, 403 for
    the admin key, with the API's one error body), then the MCP transport serves it."""

    def __init__(self) -> None:
        self.server = MemoryServer(tenant_memory)
        self._manager = self._fresh_manager()

    def _fresh_manager(self) -> StreamableHTTPSessionManager:
        # Stateless, with plain JSON replies: every POST is a whole exchange, authenticated on
        # its own. The API runs as several replicas behind one Service, and a stateful MCP
        # session lives in one process's memory, so the next request of a session could land
        # where it is unknown; tool calls answer once, so there is no stream to keep open.
        # Host checks (DNS rebinding) are off: the API is reached by any name it is deployed
        # under, and a key, never ambient browser credentials, is what grants access.
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return self.server.session_manager

    def running(self) -> AbstractAsyncContextManager[None]:
        """The transport's task group, held open by the API's lifespan: a new one each time
        the app starts (the SDK runs a session manager once)."""
        self._manager = self._fresh_manager()
        return self._manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            credentials = await _bearer(request)
            if credentials is None and request.headers.get(KEY_HEADER):
                # a client that cannot send a bearer header sends the key as it is
                credentials = HTTPAuthorizationCredentials(
                    scheme="Bearer", credentials=request.headers[KEY_HEADER]
                )
            svc = services(request)
            # the routes' own checks (KeyStore.identify, the admin key refused), off the loop
            # in anyio's default pool, where waits on workers never take its last 40 threads
            # (`api.capacity`)
            name = tenant(await anyio.to_thread.run_sync(caller, svc, credentials))
        except HTTPException as exc:
            if exc.status_code == 401:
                # no WWW-Authenticate: an MCP client reads that as the start of an OAuth flow,
                # which no key store here serves
                how = f"send `Authorization: Bearer <key>` or `{KEY_HEADER}: <key>`"
                detail = f"missing API key: {how}" if credentials is None else str(exc.detail)
                await reply(401, detail)(scope, receive, send)
                return
            await reply(exc.status_code, str(exc.detail), exc.headers)(scope, receive, send)
            return
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            why = f"Redis does not answer ({type(exc).__name__}); try again"
            retry = {"Retry-After": str(RETRY_AFTER_S)}
            await reply(503, why, retry)(scope, receive, send)
            return
        await self._manager.handle_request({**scope, TENANT: name}, receive, send)
