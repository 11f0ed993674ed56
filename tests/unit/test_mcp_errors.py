"""How MCP words a failure: by its kind, the one table HTTP's statuses read too."""

from __future__ import annotations

from api.mcp.errors import explain
from common.errors import Unavailable
from common.llm.budget import ModelBusy
from common.llm.transport import LLMError


def test_a_busy_model_is_unavailable_and_a_failed_call_is_the_models_failure() -> None:
    busy = explain(ModelBusy("waiting for model budget: m@http://x allows no call now"))
    assert busy is not None and busy.startswith("unavailable: waiting for model budget")
    failed = explain(LLMError("extract: the server answered 400 after 1 try"))
    assert failed == "the model backend failed: extract: the server answered 400 after 1 try"


def test_an_unavailable_store_reads_as_unavailable() -> None:
    assert explain(Unavailable("the store's disk is full; try again later")) == (
        "unavailable: the store's disk is full; try again later"
    )
