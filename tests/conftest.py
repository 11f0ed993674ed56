from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.contexts import OPEN_STORES


@pytest.fixture(autouse=True)
def _close_stores() -> Iterator[None]:
    yield
    while OPEN_STORES:
        OPEN_STORES.pop().close()
