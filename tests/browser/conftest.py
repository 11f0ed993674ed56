"""The inspector in a real browser: headless Chromium (Debian's) driven by Playwright against
a running stack (Redis DB 15, a worker, the API) holding the sample conversation and a fifth
session of changes. Skips locally where Chromium, Playwright or Redis is missing; fails under
`CI=true`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis

from tests.browser.support import Seeded, launch, missing_browser, seed
from tests.e2e.conftest import Stack, running_stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

REDIS_URL = "redis://127.0.0.1:6379/15"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required in CI)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = missing_browser()
    if reason is not None:
        _unavailable(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def stack(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        _unavailable("Redis is not running on 127.0.0.1:6379")
    finally:
        client.close()
    with running_stack(REDIS_URL, tmp_path_factory.mktemp("stack")) as running:
        yield running


@pytest.fixture(scope="module")
def seeded(stack: Stack) -> Seeded:
    return seed(stack)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh tab (its own sessionStorage); an uncaught script error fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    context.close()
    assert errors == [], errors
