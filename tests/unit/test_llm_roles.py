"""A backend per role: the settings' combinations, what `make_backend` builds from each, the
refused ones with their messages, and the memory version of each."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from common.llm.model_backend import ModelBackend
from common.llm.openai_compat import OpenAITransport
from common.llm.roles import RoleBackend
from common.llm.rules import RulesBackend
from common.llm.transport import LLMError
from common.memory.version import compute
from common.settings import LLMSettings, Settings
from workers.wiring import make_backend

EXTRACTOR = {"base_url": "http://fx:8000/v1", "model": "fact-executor"}
GENERAL = {"base_url": "http://general:8000/v1", "model": "qwen"}


def llm(**values: Any) -> LLMSettings:
    return LLMSettings.model_validate(values)


def built(**values: Any) -> Any:
    return make_backend(Settings(llm=llm(**values)))


def transport(backend: object, role: str) -> Any:
    return getattr(backend, f"_{role}")


def test_backend_alone_means_what_it_always_did() -> None:
    assert isinstance(built(), RulesBackend)
    openai = built(backend="openai", general=GENERAL)
    assert isinstance(openai, ModelBackend) and openai.name == "openai"
    assert transport(openai, "extractor") is transport(openai, "general")  # shared endpoint
    own = built(backend="openai", general=GENERAL, extractor=EXTRACTOR)
    assert transport(own, "extractor").endpoint == "fact-executor@http://fx:8000/v1"
    vllm = built(backend="vllm", general=GENERAL)
    assert isinstance(vllm, ModelBackend) and vllm.name == "vllm"
    assert transport(vllm, "extractor").name == "vllm"
    for backend in ("rules", "openai", "vllm"):
        settings = llm(backend=backend, general=GENERAL)
        assert settings.backend_name == backend


def test_an_extractor_on_an_endpoint_beside_rules_construction() -> None:
    backend = built(extractor_backend="openai", extractor=EXTRACTOR)
    assert isinstance(backend, RoleBackend) and backend.name == "openai+rules"
    assert isinstance(backend.general, RulesBackend)
    assert isinstance(backend.extractor, ModelBackend)
    extractor = transport(backend.extractor, "extractor")
    assert isinstance(extractor, OpenAITransport) and extractor.name == "openai:extractor"
    assert extractor.endpoint == "fact-executor@http://fx:8000/v1"


def test_rules_extraction_beside_a_general_model() -> None:
    for values in (
        {"backend": "openai", "extractor_backend": "rules"},
        {"extractor_backend": "rules", "general_backend": "openai"},
        {"general_backend": "openai"},  # the extractor follows `backend`, rules
    ):
        backend = built(general=GENERAL, **values)
        assert isinstance(backend, RoleBackend) and backend.name == "rules+openai", values
        assert isinstance(backend.extractor, RulesBackend)
        assert transport(backend.general, "general").endpoint == "qwen@http://general:8000/v1"


def test_the_in_process_engine_beside_rules_construction() -> None:
    for values in ({"backend": "vllm", "general_backend": "rules"}, {"extractor_backend": "vllm"}):
        backend = built(**values)
        assert isinstance(backend, RoleBackend) and backend.name == "vllm+rules", values
        assert transport(backend.extractor, "extractor").name == "vllm"


def test_both_roles_named_alike_is_the_one_word_backend() -> None:
    both = llm(extractor_backend="openai", general_backend="openai", general=GENERAL)
    assert both.backend_name == "openai"
    assert isinstance(make_backend(Settings(llm=both)), ModelBackend)
    assert llm(extractor_backend="rules", general_backend="rules").backend_name == "rules"


def test_the_roles_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATOMMEM_LLM__EXTRACTOR_BACKEND", "openai")
    monkeypatch.setenv("ATOMMEM_LLM__GENERAL_BACKEND", "rules")
    monkeypatch.setenv("ATOMMEM_LLM__EXTRACTOR__BASE_URL", "http://fx:8000/v1")
    monkeypatch.setenv("ATOMMEM_LLM__EXTRACTOR__MODEL", "fact-executor")
    settings = Settings()
    assert (settings.llm.extractor_role, settings.llm.general_role) == ("openai", "rules")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"general_backend": "vllm"}, "GENERAL_BACKEND=vllm: the in-process vLLM engine serves"),
        (
            {"extractor_backend": "openai", "general": GENERAL},  # general is rules: no sharing
            "the extractor has no endpoint of its own: set ATOMMEM_LLM__EXTRACTOR__BASE_URL",
        ),
        (
            {"extractor_backend": "openai", "extractor": {"model": "fact-executor"}},
            "extractor role is `openai` but its endpoint has no base_url and no api_key",
        ),
        (
            {"extractor_backend": "rules", "backend": "openai"},
            "general role is `openai` but its endpoint has no base_url and no api_key: set "
            "ATOMMEM_LLM__GENERAL__BASE_URL",
        ),
        (
            {"backend": "openai", "general": GENERAL, "extractor": {"max_concurrent": 4}},
            "EXTRACTOR__MAX_CONCURRENT limit the extractor, but it has no endpoint of its own",
        ),
    ],
)
def test_combinations_that_cannot_work_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("`", ".").replace("(", ".")):
        llm(**values)


def test_an_extractor_of_its_own_takes_its_own_limits_beside_rules() -> None:
    limited = {**EXTRACTOR, "max_concurrent": 16}
    settings = llm(extractor_backend="openai", extractor=limited)
    assert settings.extractor_endpoint.max_concurrent == 16


def test_the_judge_is_a_general_stage() -> None:
    backend = built(extractor_backend="openai", extractor=EXTRACTOR)
    with pytest.raises(LLMError, match="the judge runs on the general role"):
        backend.judge("q", "gold", "generated")


def test_the_memory_version_names_each_roles_backend() -> None:
    def version(**values: Any) -> tuple[str, str, str]:
        v = compute(Settings(llm=llm(**values)))
        return v.extractor_backend, v.extractor_model, v.general_model

    assert version() == ("rules", "rules", "rules")
    assert version(extractor_backend="openai", extractor=EXTRACTOR) == (
        "openai",
        "fact-executor",
        "rules",
    )
    assert version(backend="openai", extractor_backend="rules", general=GENERAL) == (
        "rules",
        "rules",
        "qwen",
    )
    # An extractor sharing the general endpoint is answered by the general model.
    assert version(backend="openai", general=GENERAL) == ("openai", "qwen", "qwen")
    assert version(extractor_backend="vllm", general_backend="rules")[2] == "rules"


def test_naming_both_roles_alike_keeps_the_one_word_backends_version() -> None:
    one = compute(Settings(llm=llm(backend="openai", general=GENERAL)))
    both = llm(extractor_backend="openai", general_backend="openai", general=GENERAL)
    assert compute(Settings(llm=both)) == one
    mixed = compute(Settings(llm=llm(extractor_backend="openai", extractor=EXTRACTOR)))
    assert mixed.settings_hash != compute(Settings()).settings_hash
    assert mixed.label.startswith("openai:fact-executor+rules@")
