"""The e2e tier's stack: one a module, on the module's own database of the shared Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.redis import redis_or_skip, shared_url
from tests.helpers.stack import Stack, running_stack


@pytest.fixture(scope="module")
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    url = shared_url(request.module.__name__)
    redis_or_skip(url).close()
    with running_stack(url, tmp_path_factory.mktemp("stack")) as running:
        yield running
