"""The web memory inspector at `/ui`: static files (HTML, ES modules, CSS) whose script reads
memory through the same `/v1` routes, with the signed-in tenant's key."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC = Path(__file__).resolve().parent / "static"

# Only the page's own files run or style it; the page renders memory as text, and this
# policy is the second wall: a fact that held markup could not load or run anything.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class InspectorFiles(StaticFiles):
    """The inspector's files, each with the headers above."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


def mount(app: FastAPI) -> None:
    """Serve the inspector at `/ui/` (`/ui` redirects there); it is not part of the API's
    schema."""
    app.mount("/ui", InspectorFiles(directory=STATIC, html=True), name="ui")
