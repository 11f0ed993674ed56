"""A question and its model endpoint, through a real query worker on a private Redis and a
fake OpenAI-compatible server: a question waiting on the budget never calls the model after its
caller gave up, and one the server keeps answering 429 is a 503 with Retry-After (the SDK's
retryable `Unavailable`), not a 400."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from fastapi.testclient import TestClient
from pydantic import SecretStr

import api.main
from api.auth import KeyStore
from api.client import Unavailable, result
from common import errors
from common.settings import ApiSettings, BrokerSettings, Settings
from tests.helpers.fake_llm_server import FakeLLM, rate_limited, schema_answer, serve
from tests.helpers.redis_server import RedisServer, start_redis
from tests.helpers.workers import create_spaces, producer, worker_env
from workers.launch import WorkerProcess

pytestmark = pytest.mark.integration

SPACE = "asked"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = start_redis(tmp_path / "redis", appendonly=False)
    yield srv
    srv.stop()


def query_worker(tmp_path: Path, url: str, fake: FakeLLM, **llm: str) -> WorkerProcess:
    create_spaces(tmp_path, [SPACE])
    env = worker_env(url, tmp_path)
    env |= {
        "ATOMMEM_LLM__BACKEND": "openai",
        "ATOMMEM_LLM__GENERAL__BASE_URL": fake.base_url,
        "ATOMMEM_LLM__GENERAL__MODEL": "fake",
        "ATOMMEM_LLM__STRUCTURED_OUTPUT": "json_schema",
        "ATOMMEM_LLM__BACKOFF_S": "0.2",
    }
    env |= {f"ATOMMEM_LLM__{k.upper()}": v for k, v in llm.items()}
    worker = WorkerProcess(env, tmp_path / "worker.log", "query", 1)
    worker.wait_ready()
    return worker


def test_a_question_never_calls_the_model_after_its_caller_gave_up(
    tmp_path: Path, server: RedisServer
) -> None:
    """One call per 30 s: a search spends it, then an ask whose caller waits 2 s gives up
    while its call waits for the budget; once the budget is back, the server has still seen
    no call of the ask (before, the task waited out the budget and called the model)."""
    url = server.url()
    period = 30.0  # past the first search's loading of the embedding model
    with serve(schema_answer) as fake:
        worker = query_worker(tmp_path, url, fake, general__rpm="1", budget_period_s=str(period))
        client = producer(url)
        try:
            client.search("default", SPACE, "where did Maya hike?", timeout=60)
            spent = len(fake.requests)
            assert spent == 1, "the search spends the budget"
            # It waits for the budget no longer than its caller: a 504, or a 503 at once
            # when the budget is known to come back too late.
            with pytest.raises((TimeoutError, errors.Unavailable)):
                client.ask("default", SPACE, "what is the cat called?", timeout=2)
            back = fake.arrivals[0] + period * 1.01
            time.sleep(max(0.0, back + 3 - time.time()))  # the budget is back by now
            after = len(fake.requests)
            assert after == spent, f"{after - spent} model calls after the caller gave up"
            client.search("default", SPACE, "is the worker free again?", timeout=10)
        finally:
            worker.stop()
    assert len(fake.requests) > spent  # the budget was back: a later question does call


def test_a_question_the_server_throttles_to_the_last_try_is_a_503_with_retry_after(
    tmp_path: Path, server: RedisServer
) -> None:
    url = server.url()
    settings = Settings(
        broker=BrokerSettings(url=url), api=ApiSettings(admin_key=SecretStr("admin-key"))
    )
    keystore = KeyStore(redis.Redis.from_url(url, decode_responses=True), "admin-key")
    keystore.create_tenant("default")
    key = str(keystore.create_key("default")["api_key"])
    with serve(rate_limited(retry_after=0.2)) as fake:
        worker = query_worker(tmp_path, url, fake)
        try:
            with TestClient(api.main.create_app(settings)) as http:
                response = http.post(
                    f"/v1/spaces/{SPACE}/ask",
                    json={"question": "what is the cat called?"},
                    headers={"Authorization": f"Bearer {key}"},
                )
        finally:
            worker.stop()
    assert len(fake.requests) >= 2, "the server was asked, and throttled every try"
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) >= 1
    assert "waiting for model budget" in response.json()["detail"]
    with pytest.raises(Unavailable) as raised:
        # what the SDK raises for it: retryable, with its wait
        result(httpx.Response(503, headers=response.headers, content=response.content))
    assert raised.value.retry_after >= 1
