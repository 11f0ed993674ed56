"""The API serves no page that loads scripts from a CDN on the inspector's origin."""

from __future__ import annotations

from fastapi.testclient import TestClient

import api.main
from common.settings import BrokerSettings, Settings
from tests.helpers.redis import unreachable_url


def test_no_docs_page_only_the_spec() -> None:
    app = api.main.create_app(Settings(broker=BrokerSettings(url=unreachable_url())))
    client = TestClient(app)  # no lifespan: these routes touch no service
    for page in ("/docs", "/docs/oauth2-redirect", "/redoc"):
        response = client.get(page)
        assert response.status_code == 404, page
        assert "cdn" not in response.text.lower()
    spec = client.get("/openapi.json")
    assert spec.status_code == 200 and spec.json()["info"]["title"] == "AtomMem"
