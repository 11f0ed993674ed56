"""The Fact Executor's SFT chain on a tiny model built here: teach (a scripted teacher on
loopback) -> review -> export -> LoRA training whose loss falls, whose adapter loads and
generates, resumes from its checkpoint, and is what vLLM's `LoRARequest` is built with."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from common.executor import review, train
from common.executor.dataset import read_split
from common.executor.review import FactDecision, Verdict
from common.executor.samples import Sample, read_samples
from common.llm import vllm_engine
from common.llm.transport import ChatRequest, LLMError
from common.settings import VLLMSettings
from tests.helpers import tiny_lm
from tests.helpers.cli import run
from tests.helpers.samples import SAMPLE
from tests.helpers.teacher import teacher

FAST: dict[str, Any] = {
    "rank": 8,
    "alpha": 16,
    "learning_rate": 1e-2,
    "batch_size": 4,
    "grad_accum": 1,
}


def verdict(sample: Sample, i: int) -> Verdict:
    """A reviewer's decisions that use every duty across the samples."""
    facts = []
    for j, fact in enumerate(sample.facts):
        duty = ("accept", "edit", "split", "drop")[(i + j) % 4]
        if duty == "accept":
            facts.append(FactDecision(action="accept", texts=[fact]))
        elif duty == "edit":
            facts.append(FactDecision(action="edit", texts=[fact.replace(" said: ", " says: ")]))
        elif duty == "split":
            half = len(fact) // 2
            facts.append(FactDecision(action="split", texts=[fact[:half], fact[half:]]))
        else:
            facts.append(FactDecision(action="drop"))
    return Verdict(facts=facts, excluded=i == 5, reviewer="rita")


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Samples of two conversations taught, every one reviewed, exported, and a tiny model."""
    root = tmp_path_factory.mktemp("chain")
    other = json.loads(SAMPLE.read_text())
    other["space"] = "other"
    other["sessions"] = other["sessions"][:2]
    second = root / "other.json"
    second.write_text(json.dumps(other))
    with teacher() as server:
        done = run(
            root, "executor", "teach", str(SAMPLE), str(second), "--teacher", server.base_url
        )
        assert done.returncode == 0, done.stderr
    samples_path = root / "executor" / "samples.jsonl"
    for i, sample in enumerate(read_samples(samples_path)):
        review.record(samples_path, review.decide(sample, verdict(sample, i)))
    data = root / "sft"
    exported = run(root, "executor", "export", "--out", str(data), "--validation", "0.5")
    assert exported.returncode == 0, exported.stderr
    records = read_split(data / "train.jsonl") + read_split(data / "validation.jsonl")
    texts = [m["content"] for r in records for m in r.messages]
    model = tiny_lm.build(root / "tiny", texts)
    return {"root": root, "data": data, "model": model}


def test_the_export_holds_the_review(chain: dict[str, Path]) -> None:
    stats = json.loads((chain["data"] / "stats.json").read_text())
    train_split, validation = stats["splits"]["train"], stats["splits"]["validation"]
    assert {train_split["conversations"][0], validation["conversations"][0]} == {"demo", "other"}
    assert train_split["samples"] + validation["samples"] == 20 + 11 - 1  # one excluded
    assert stats["review"]["reviewed"] == 31 and stats["review"]["excluded"] == 1
    assert all(stats["review"]["actions"][a] > 0 for a in review.ACTIONS)


@pytest.fixture(scope="module")
def trained(chain: dict[str, Path]) -> train.TrainResult:
    """Three epochs of LoRA on the tiny model (about 15 updates, seconds on a CPU)."""
    config = train.TrainConfig(
        model=str(chain["model"]),
        data=chain["data"],
        out=chain["root"] / "run",
        epochs=3,
        save_steps=1000,
        max_length=768,
        **FAST,
    )
    return train.train(config, quiet=True)


def test_lora_training_lowers_the_loss_and_the_adapter_generates(
    chain: dict[str, Path], trained: train.TrainResult
) -> None:
    result, out = trained, chain["root"] / "run"
    assert result.examples["train"] > 0 and result.examples["validation"] > 0
    assert result.eval_loss is not None and result.resumed_from is None
    first, last = result.losses[:2], result.losses[-2:]
    assert sum(last) < sum(first) - 1.0, result.losses
    adapter = result.adapter
    assert (adapter / "adapter_config.json").is_file()
    assert (adapter / "adapter_model.safetensors").is_file()
    assert vllm_engine.adapter_rank(adapter) == 8
    assert json.loads((adapter / train.REPORT).read_text())["config"]["rank"] == 8
    record = read_split(chain["data"] / "validation.jsonl")[0]
    said = train.generate(str(chain["model"]), adapter, record.messages[:-1], max_new_tokens=8)
    assert isinstance(said, str)
    checkpoints = sorted(out.glob("checkpoint-*"))
    assert checkpoints, "no checkpoint saved"


def test_a_run_resumes_from_its_last_checkpoint(chain: dict[str, Path]) -> None:
    out = chain["root"] / "resumed"
    args = [
        "executor",
        "train",
        "--model",
        str(chain["model"]),
        "--data",
        str(chain["data"]),
        "--out",
        str(out),
        "--rank",
        "8",
        "--alpha",
        "16",
        "--lr",
        "3e-3",
        "--batch-size",
        "4",
        "--grad-accum",
        "1",
        "--max-length",
        "768",
        "--save-steps",
        "2",
    ]
    first = run(chain["root"], *args, "--epochs", "1")
    assert first.returncode == 0, first.stderr
    before = json.loads(first.stdout)
    steps = before["steps"]
    more = run(chain["root"], *args, "--epochs", "2")
    assert more.returncode == 0, more.stderr
    result = json.loads(more.stdout)
    assert result["resumed_from"] == str(out / f"checkpoint-{steps}")
    assert result["steps"] == 2 * steps
    # the history goes on from the checkpoint's: the first run's updates were not redone
    assert result["losses"][:steps] == before["losses"] and len(result["losses"]) == 2 * steps


def test_vllm_is_asked_for_the_trained_adapter(
    chain: dict[str, Path], trained: train.TrainResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's LoRA arguments and the request vLLM gets, with a stand-in vllm module
    (the run on a GPU is tests/gpu/test_vllm_gpu.py's, skipped here with its reason)."""
    adapter = trained.adapter
    calls: list[dict[str, Any]] = []

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

        def chat(self, conversations: list[Any], **kwargs: Any) -> list[Any]:
            calls.append(kwargs)
            return []

    class LoRARequest:
        def __init__(self, name: str, lora_id: int, path: str) -> None:
            self.lora_name, self.lora_int_id, self.lora_path = name, lora_id, path

    vllm = ModuleType("vllm")
    vllm.LLM = LLM  # type: ignore[attr-defined]
    vllm.SamplingParams = lambda **kw: kw  # type: ignore[attr-defined]
    params = ModuleType("vllm.sampling_params")
    params.StructuredOutputsParams = lambda **kw: kw  # type: ignore[attr-defined]
    lora_module = ModuleType("vllm.lora.request")
    lora_module.LoRARequest = LoRARequest  # type: ignore[attr-defined]
    for name, module in (
        ("vllm", vllm),
        ("vllm.sampling_params", params),
        ("vllm.lora", ModuleType("vllm.lora")),
        ("vllm.lora.request", lora_module),
    ):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(vllm_engine, "_cuda_available", lambda: True)
    vllm_engine.clear_engines()
    cfg = VLLMSettings(model=str(chain["model"]), lora_path=adapter, lora_rank=8)
    kwargs = vllm_engine.engine_kwargs(cfg)
    assert (kwargs["enable_lora"], kwargs["max_lora_rank"]) == (True, 8)
    request = ChatRequest("extract", [{"role": "user", "content": "hi"}], {}, "x", 16)
    vllm_engine.VLLMTransport(cfg, 0.0, None).complete([request])
    lora = calls[0]["lora_request"]
    assert (lora.lora_name, lora.lora_int_id, lora.lora_path) == (
        vllm_engine.LORA_NAME,
        vllm_engine.LORA_ID,
        str(adapter),
    )
    with pytest.raises(LLMError, match="LoRA rank 8, above llm.vllm.lora_rank=4"):
        vllm_engine.engine_kwargs(cfg.model_copy(update={"lora_rank": 4}))
    vllm_engine.clear_engines()
