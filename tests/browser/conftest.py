"""The inspector in a real browser: headless Chromium (Debian's) driven by Playwright against
a running stack (the module's own Redis database, a worker, the API) holding the sample
conversation and a fifth session of changes. Skips locally where Chromium, Playwright or Redis
is missing; fails under `CI=true`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.helpers.browser import Seeded, launch, missing_browser, seed
from tests.helpers.redis import redis_or_skip, shared_url
from tests.helpers.skips import unavailable
from tests.helpers.stack import Stack, running_stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = missing_browser()
    if reason is not None:
        unavailable(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    url = shared_url(request.module.__name__)
    redis_or_skip(url).close()
    with running_stack(url, tmp_path_factory.mktemp("stack")) as running:
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
