"""The one rule for a dependency a test cannot run without: skip here, fail under `CI=true`."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skip the test for want of what `reason` names; under `CI=true`, where every tier must
    run, fail it instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (required in CI)")
    pytest.skip(reason)
