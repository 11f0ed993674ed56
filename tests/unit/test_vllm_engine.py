"""The vLLM transport against a fake `vllm` package: one batched chat call per batch, guided
JSON, LoRA, token counts in order, one engine per process, and clear errors without vLLM."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from common.llm import vllm_engine
from common.llm.transport import ChatRequest, LLMError
from common.llm.vllm_engine import VLLMTransport
from common.settings import VLLMSettings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {"type": "object", "properties": {"facts": {"type": "array"}}, "required": ["facts"]}


@dataclass
class FakeSequence:
    text: str
    token_ids: list[int]
    finish_reason: str


@dataclass
class FakeRequestOutput:
    prompt_token_ids: list[int]
    outputs: list[FakeSequence]


class FakeVLLM:
    """What the fake package recorded: engines built and their chat calls."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.engines: list[Any] = []
        self.fail_with: Exception | None = None


def _fake_vllm(state: FakeVLLM, api: str) -> dict[str, ModuleType]:
    """Modules shaped like vLLM's: `LLM`, `SamplingParams`, the guided-JSON params of `api`
    ("structured" for vLLM >= 0.12, "guided" before), and `LoRARequest`."""

    class GuidedParams:
        def __init__(self, json: dict[str, Any]) -> None:
            if json.get("reject"):
                raise ValueError("unsupported schema")
            self.json = json

    class SamplingParams:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

    class LoRARequest:
        def __init__(self, lora_name: str, lora_int_id: int, lora_path: str) -> None:
            self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs
            self.calls: list[dict[str, Any]] = []
            state.engines.append(self)

        def chat(self, messages: list[list[dict[str, str]]], **kwargs: Any) -> list[Any]:
            self.calls.append({"messages": messages, **kwargs})
            if state.fail_with is not None:
                raise state.fail_with
            # Token counts derived from each request so the order of results is checkable.
            return [
                FakeRequestOutput(
                    prompt_token_ids=list(range(len(conv[-1]["content"]))),
                    outputs=[
                        FakeSequence(
                            text=f'{{"facts": ["{conv[-1]["content"]}"]}}',
                            token_ids=list(range(params.kwargs["max_tokens"] // 10)),
                            finish_reason="stop",
                        )
                    ],
                )
                for conv, params in zip(messages, kwargs["sampling_params"], strict=True)
            ]

    vllm = ModuleType("vllm")
    vllm.LLM = LLM  # type: ignore[attr-defined]
    vllm.SamplingParams = SamplingParams  # type: ignore[attr-defined]
    sampling = ModuleType("vllm.sampling_params")
    sampling.SamplingParams = SamplingParams  # type: ignore[attr-defined]
    name = "StructuredOutputsParams" if api == "structured" else "GuidedDecodingParams"
    setattr(sampling, name, GuidedParams)
    lora = ModuleType("vllm.lora")
    lora_request = ModuleType("vllm.lora.request")
    lora_request.LoRARequest = LoRARequest  # type: ignore[attr-defined]
    return {
        "vllm": vllm,
        "vllm.sampling_params": sampling,
        "vllm.lora": lora,
        "vllm.lora.request": lora_request,
    }


@pytest.fixture(autouse=True)
def _no_engines() -> Iterator[None]:
    vllm_engine.clear_engines()
    yield
    vllm_engine.clear_engines()


@pytest.fixture(params=["structured", "guided"])
def fake(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> FakeVLLM:
    state = FakeVLLM(request.param)
    for name, module in _fake_vllm(state, request.param).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(vllm_engine, "_cuda_available", lambda: True)
    return state


def _requests(*contents: str, schema: dict[str, Any] = SCHEMA) -> list[ChatRequest]:
    return [
        ChatRequest(
            stage="extract",
            messages=[
                {"role": "system", "content": "Extract facts."},
                {"role": "user", "content": c},
            ],
            schema=schema,
            schema_name="Facts",
            max_tokens=100 * (i + 1),
        )
        for i, c in enumerate(contents)
    ]


def test_module_import_does_not_import_vllm() -> None:
    code = (
        "import sys, common.llm.vllm_engine; "
        "sys.exit(1 if 'vllm' in sys.modules or 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_one_batched_chat_call_per_complete(fake: FakeVLLM) -> None:
    transport = VLLMTransport(VLLMSettings(model="m"), temperature=0.0, seed=7)
    assert transport.name == "vllm"

    results = transport.complete(_requests("a", "bbb", "ccccc"))

    (engine,) = fake.engines
    (call,) = engine.calls
    assert [conv[-1]["content"] for conv in call["messages"]] == ["a", "bbb", "ccccc"]
    assert call["messages"][0][0] == {"role": "system", "content": "Extract facts."}
    assert call["lora_request"] is None
    params = call["sampling_params"]
    assert [p.kwargs["max_tokens"] for p in params] == [100, 200, 300]
    assert all(p.kwargs["temperature"] == 0.0 and p.kwargs["seed"] == 7 for p in params)
    guided = [p.kwargs.get("structured_outputs") or p.kwargs.get("guided_decoding") for p in params]
    assert all(g is not None and g.json == SCHEMA for g in guided)

    assert [r.prompt_tokens for r in results] == [1, 3, 5]
    assert [r.completion_tokens for r in results] == [10, 20, 30]
    assert [r.text for r in results] == [f'{{"facts": ["{c}"]}}' for c in ("a", "bbb", "ccccc")]
    assert all(r.error is None and r.finish_reason == "stop" for r in results)


def test_old_and_new_guided_decoding_names(fake: FakeVLLM) -> None:
    VLLMTransport(VLLMSettings(), 0.0, None).complete(_requests("x"))
    (params,) = fake.engines[0].calls[0]["sampling_params"]
    used = set(params.kwargs) & {"structured_outputs", "guided_decoding"}
    assert used == {"structured_outputs" if fake.api == "structured" else "guided_decoding"}


def test_engine_built_once_per_process(fake: FakeVLLM) -> None:
    cfg = VLLMSettings(model="m", max_model_len=4096, gpu_memory_utilization=0.5)
    VLLMTransport(cfg, 0.0, None).complete(_requests("a"))
    VLLMTransport(cfg, 0.0, None).complete(_requests("b", "c"))

    (engine,) = fake.engines
    assert len(engine.calls) == 2
    assert engine.kwargs == {
        "model": "m",
        "tensor_parallel_size": 1,
        "dtype": "auto",
        "gpu_memory_utilization": 0.5,
        "max_model_len": 4096,
    }


def test_lora_adapter(fake: FakeVLLM, tmp_path: Path) -> None:
    cfg = VLLMSettings(model="m", lora_path=tmp_path / "adapter", lora_rank=16)
    VLLMTransport(cfg, 0.0, None).complete(_requests("a", "b"))

    (engine,) = fake.engines
    assert engine.kwargs["enable_lora"] is True
    assert engine.kwargs["max_lora_rank"] == 16
    lora = engine.calls[0]["lora_request"]
    assert (lora.lora_name, lora.lora_int_id, lora.lora_path) == (
        "fact-executor",
        1,
        str(tmp_path / "adapter"),
    )


def test_generation_failure_fails_every_request_without_raising(fake: FakeVLLM) -> None:
    fake.fail_with = RuntimeError("CUDA out of memory")
    results = VLLMTransport(VLLMSettings(), 0.0, None).complete(_requests("a", "b"))

    assert len(results) == 2
    assert all("CUDA out of memory" in (r.error or "") and not r.retryable for r in results)


def test_rejected_schema_fails_only_its_request(fake: FakeVLLM) -> None:
    requests = [*_requests("a"), *_requests("b", schema={"reject": True}), *_requests("c")]
    results = VLLMTransport(VLLMSettings(), 0.0, None).complete(requests)

    assert [r.error is None for r in results] == [True, False, True]
    assert "unsupported schema" in (results[1].error or "")
    assert len(fake.engines[0].calls[0]["messages"]) == 2


def test_empty_batch_loads_nothing(fake: FakeVLLM) -> None:
    assert VLLMTransport(VLLMSettings(), 0.0, None).complete([]) == []
    assert fake.engines == []


def test_without_vllm_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(LLMError, match=r"atommem\[vllm\]"):
        VLLMTransport(VLLMSettings(), 0.0, None).complete(_requests("a"))


def test_without_gpu_says_so(fake: FakeVLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_engine, "_cuda_available", lambda: False)
    with pytest.raises(LLMError, match="CUDA GPU"):
        VLLMTransport(VLLMSettings(), 0.0, None).complete(_requests("a"))
    assert fake.engines == []
