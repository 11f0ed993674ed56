"""The vLLM transport on a real GPU: a batch of two guided-JSON requests to a small model.

Runs only where vllm is installed, a CUDA GPU is visible and `ATOMMEM_TEST_VLLM_MODEL` names a
small chat model (a local path or hub id); skipped, with the reason, everywhere else.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.llm import vllm_engine
from common.llm.transport import ChatRequest
from common.llm.vllm_engine import VLLMTransport
from common.settings import VLLMSettings

MODEL_ENV = "ATOMMEM_TEST_VLLM_MODEL"
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "year": {"type": "integer"}},
    "required": ["city", "year"],
    "additionalProperties": False,
}


def _skip_reason() -> str | None:
    # find_spec, not import: collecting this file must stay cheap where vllm is installed.
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed (pip install 'atommem[vllm]')"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU is visible"
    if not os.environ.get(MODEL_ENV):
        return f"set {MODEL_ENV} to a small chat model (a local path or hub id)"
    return None


_REASON = _skip_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_REASON is not None, reason=_REASON or "")]


@pytest.fixture
def transport() -> Iterator[VLLMTransport]:
    vllm_engine.clear_engines()
    cfg = VLLMSettings(model=os.environ[MODEL_ENV], gpu_memory_utilization=0.5, max_model_len=2048)
    yield VLLMTransport(cfg, temperature=0.0, seed=42)
    vllm_engine.clear_engines()


# vLLM and torch emit UserWarnings of their own on start-up; report them, do not fail on them.
@pytest.mark.filterwarnings("default::UserWarning")
def test_batch_of_two_guided_json_requests(transport: VLLMTransport) -> None:
    questions = ["Name a city in France and the year it was founded.", "Same, for Italy."]
    requests = [
        ChatRequest(
            stage="extract",
            messages=[
                {"role": "system", "content": "Answer with a JSON object."},
                {"role": "user", "content": q},
            ],
            schema=SCHEMA,
            schema_name="City",
            max_tokens=128,
        )
        for q in questions
    ]

    results = transport.complete(requests)

    assert len(results) == 2
    for result in results:
        assert result.error is None, result.error
        assert set(json.loads(result.text)) == {"city", "year"}
        assert result.prompt_tokens > 0
        assert result.completion_tokens > 0


@pytest.mark.filterwarnings("default::UserWarning")
def test_a_lora_adapter_as_training_saves_it_is_served(tmp_path: Path) -> None:
    """A PEFT LoRA adapter of the model (as `atommem executor train` saves one; untrained, so
    it leaves the model's answers as they are) loaded by the engine and asked for in every
    request of a batch."""
    pytest.importorskip("peft", reason="peft is not installed (pip install 'atommem[executor]')")
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = os.environ[MODEL_ENV]
    base = AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
    get_peft_model(base, lora).save_pretrained(str(tmp_path / "adapter"))
    vllm_engine.clear_engines()
    cfg = VLLMSettings(
        model=model,
        lora_path=tmp_path / "adapter",
        lora_rank=8,
        gpu_memory_utilization=0.5,
        max_model_len=2048,
    )
    try:
        done = VLLMTransport(cfg, temperature=0.0, seed=42).complete(
            [
                ChatRequest(
                    stage="extract",
                    messages=[{"role": "user", "content": "Name a city in France."}],
                    schema=SCHEMA,
                    schema_name="City",
                    max_tokens=128,
                )
            ]
        )
    finally:
        vllm_engine.clear_engines()
    assert done[0].error is None, done[0].error
    assert set(json.loads(done[0].text)) == {"city", "year"}
