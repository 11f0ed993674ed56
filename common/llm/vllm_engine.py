"""The in-process vLLM engine as a `Transport`: the Fact Executor on an extract worker's GPU.

vLLM is an optional extra that needs a CUDA GPU, so it is imported only when the first batch
arrives, inside the worker process: an engine built before a fork would share CUDA state with
its children. One engine serves every call of a process, and each call is one batched
`LLM.chat`, so vLLM schedules the whole batch together.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.llm.transport import ChatRequest, Completion, LLMError
from common.settings import VLLMSettings

INSTALL_HINT = "pip install 'atommem[vllm]'"
LORA_NAME = "fact-executor"
LORA_ID = 1


@dataclass
class _Engine:
    """A loaded `vllm.LLM`; `lock` serialises calls because the offline engine is not
    thread-safe (a threaded worker pool would otherwise interleave two batches)."""

    llm: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


_ENGINES: dict[str, _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _cuda_available() -> bool:
    """Whether torch sees a CUDA device (torch comes with vLLM and sentence-transformers)."""
    import torch

    return bool(torch.cuda.is_available())


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise LLMError(f"llm.backend=vllm needs the optional vllm package: {INSTALL_HINT}") from exc
    return vllm


def _guided_json(schema: dict[str, Any]) -> dict[str, Any]:
    """SamplingParams kwargs that constrain the output to `schema`.

    vLLM 0.12 removed `GuidedDecodingParams`/`guided_decoding` in favour of
    `StructuredOutputsParams`/`structured_outputs`; older releases only have the former.
    """
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:
        pass
    else:
        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    try:
        from vllm.sampling_params import GuidedDecodingParams
    except ImportError as exc:
        raise LLMError(
            "this vllm release has neither StructuredOutputsParams nor GuidedDecodingParams; "
            f"install a supported one: {INSTALL_HINT}"
        ) from exc
    return {"guided_decoding": GuidedDecodingParams(json=schema)}


def chat_input(
    request: ChatRequest, temperature: float, seed: int | None
) -> tuple[list[dict[str, str]], Any]:
    """One request as vLLM's chat conversation and its JSON-guided SamplingParams."""
    from vllm import SamplingParams

    params = SamplingParams(
        temperature=temperature,
        seed=seed,
        max_tokens=request.max_tokens,
        **_guided_json(request.schema),
    )
    return [dict(message) for message in request.messages], params


def to_completion(output: Any) -> Completion:
    """The text and token counts of one vLLM `RequestOutput`."""
    best = output.outputs[0]
    return Completion(
        text=best.text,
        prompt_tokens=len(output.prompt_token_ids or ()),
        completion_tokens=len(best.token_ids),
        finish_reason=best.finish_reason,
    )


def adapter_rank(adapter: Path) -> int | None:
    """The LoRA rank in an adapter's `adapter_config.json` (None when it has none)."""
    config = adapter / "adapter_config.json"
    if not config.is_file():
        return None
    rank = json.loads(config.read_text(encoding="utf-8")).get("r")
    return int(rank) if rank is not None else None


def engine_kwargs(cfg: VLLMSettings) -> dict[str, Any]:
    """`vllm.LLM` constructor arguments for these settings; an adapter of a higher rank than
    the engine allows fails here, by name, rather than inside vLLM."""
    kwargs: dict[str, Any] = {
        "model": cfg.model,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "dtype": cfg.dtype,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "max_model_len": cfg.max_model_len,
    }
    if cfg.lora_path is not None:
        rank = adapter_rank(cfg.lora_path)
        if rank is not None and rank > cfg.lora_rank:
            raise LLMError(
                f"the adapter {cfg.lora_path} has LoRA rank {rank}, above "
                f"llm.vllm.lora_rank={cfg.lora_rank}: set ATOMMEM_LLM__VLLM__LORA_RANK={rank}"
            )
        kwargs.update(enable_lora=True, max_lora_rank=cfg.lora_rank)
    return kwargs


def _engine(cfg: VLLMSettings) -> _Engine:
    """This process's engine for `cfg`, loaded on first use."""
    key = cfg.model_dump_json()
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            return engine
        vllm = _import_vllm()
        if not _cuda_available():
            raise LLMError(
                "llm.backend=vllm needs a CUDA GPU visible to this worker, and none is; "
                "run extract workers on a GPU host or use llm.backend=openai"
            )
        try:
            llm = vllm.LLM(**engine_kwargs(cfg))
        except Exception as exc:
            raise LLMError(f"vLLM could not load {cfg.model!r}: {exc}") from exc
        engine = _ENGINES[key] = _Engine(llm)
        return engine


def clear_engines() -> None:
    """Forget the loaded engines (tests; a process that must reload its model)."""
    with _ENGINES_LOCK:
        _ENGINES.clear()


class VLLMTransport:
    """Requests answered by this process's vLLM engine, one batched chat call per batch."""

    name = "vllm"

    def __init__(self, cfg: VLLMSettings, temperature: float, seed: int | None) -> None:
        # Nothing is loaded here: transports may be built before the worker pool forks.
        self._cfg = cfg
        self._temperature = temperature
        self._seed = seed

    def complete(self, requests: list[ChatRequest]) -> list[Completion]:
        if not requests:
            return []
        engine = _engine(self._cfg)
        results: dict[int, Completion] = {}
        batch: list[int] = []
        conversations: list[list[dict[str, str]]] = []
        params: list[Any] = []
        for i, request in enumerate(requests):
            try:
                messages, sampling = chat_input(request, self._temperature, self._seed)
            except LLMError:
                raise  # the installed vllm cannot guide JSON at all: no request can succeed
            except Exception as exc:
                # A schema vLLM rejects fails its own request, not the batch.
                results[i] = Completion(error=f"invalid vLLM request: {exc}", retryable=False)
                continue
            batch.append(i)
            conversations.append(messages)
            params.append(sampling)
        if batch:
            results.update(zip(batch, self._generate(engine, conversations, params), strict=True))
        return [results[i] for i in range(len(requests))]

    def _generate(
        self, engine: _Engine, conversations: list[list[dict[str, str]]], params: list[Any]
    ) -> list[Completion]:
        lora = None
        if self._cfg.lora_path is not None:
            from vllm.lora.request import LoRARequest

            lora = LoRARequest(LORA_NAME, LORA_ID, str(self._cfg.lora_path))
        try:
            with engine.lock:
                outputs = engine.llm.chat(
                    conversations, sampling_params=params, use_tqdm=False, lora_request=lora
                )
        except Exception as exc:
            reason = f"vLLM generation failed: {type(exc).__name__}: {exc}"
            return [Completion(error=reason, retryable=False) for _ in conversations]
        if len(outputs) != len(conversations):
            reason = f"vLLM returned {len(outputs)} outputs for {len(conversations)} requests"
            return [Completion(error=reason, retryable=False) for _ in conversations]
        return [_safe_completion(output) for output in outputs]


def _safe_completion(output: Any) -> Completion:
    try:
        return to_completion(output)
    except (AttributeError, IndexError, TypeError) as exc:
        return Completion(error=f"unreadable vLLM output: {exc!r}", retryable=False)
