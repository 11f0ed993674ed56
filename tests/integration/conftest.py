"""Fixtures for tests against a real Redis and real Celery worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.redis import flushed, shared_url
from tests.helpers.samples import LOCOMO
from tests.helpers.skips import unavailable


@pytest.fixture
def redis_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of the test module's own database on the shared Redis, flushed around the test."""
    url = shared_url(request.module.__name__)
    with flushed(url):
        yield url


@pytest.fixture
def locomo() -> Path:
    if not (LOCOMO / "atommem_facts").is_dir():
        unavailable(f"the shared LoCoMo data is not at {LOCOMO}")
    return LOCOMO
