"""The SDK turns any error response into its own exceptions, whatever a proxy sends."""

from __future__ import annotations

import httpx
import pytest

from api.client import ApiError, Unavailable, result


def test_a_json_error_body_that_is_not_an_object_is_still_an_api_error() -> None:
    with pytest.raises(ApiError) as info:
        result(httpx.Response(502, json=["bad", "gateway"]))
    assert info.value.status == 502


@pytest.mark.parametrize("header", ["inf", "nan", "-5", "Wed, 21 Oct 2026 07:28:00 GMT"])
def test_an_unusable_retry_after_falls_back_to_a_second(header: str) -> None:
    with pytest.raises(Unavailable) as info:
        result(
            httpx.Response(
                503, json={"detail": "Redis does not answer"}, headers={"Retry-After": header}
            )
        )
    assert info.value.retry_after == 1.0
    assert "Redis" in str(info.value)
