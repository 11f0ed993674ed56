"""Per-process clients, created lazily on first use (never at import time, never before a fork)."""

from __future__ import annotations

import threading

import numpy as np
import redis

from common.context import MemoryContext
from common.embeddings import Embedder
from common.llm.base import LLMBackend
from common.llm.budget import Gate, endpoint_id, limits_of
from common.llm.model_backend import ModelBackend
from common.llm.openai_compat import OpenAITransport
from common.llm.roles import RoleBackend
from common.llm.rules import RulesBackend
from common.llm.transport import Transport
from common.retrieval.graph import channels
from common.settings import EmbeddingSettings, LLMEndpoint, Settings, get_settings
from common.store.backends import open_store
from common.store.coordination.budgets import LocalBudgets, ModelBudgets, RedisBudgets
from common.store.space_index import SpaceIndex

_LOCK = threading.Lock()
_EMBEDDERS: dict[tuple[str, str, int, str, str], Embedder] = {}
_LOCAL_BUDGETS: LocalBudgets | None = None


def get_embedder(cfg: EmbeddingSettings) -> Embedder:
    """One embedding model per process and configuration."""
    key = (str(cfg.model_path), cfg.device, cfg.dimension, cfg.runtime, str(cfg.cache_dir))
    with _LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = Embedder(cfg)
        return _EMBEDDERS[key]


class LazyEmbedder:
    """The process's embedder, loaded on the first encode: listing memory needs no model."""

    def __init__(self, cfg: EmbeddingSettings) -> None:
        self._cfg = cfg
        self.dimension = cfg.dimension

    def encode(self, texts: list[str]) -> np.ndarray:
        return get_embedder(self._cfg).encode(texts)


def model_budgets(settings: Settings) -> ModelBudgets:
    """Where the endpoints' budgets live: the broker's Redis, shared by every process, or
    (no broker) this process, the same limits kept in memory."""
    global _LOCAL_BUDGETS
    if settings.broker.url:
        return RedisBudgets(redis.Redis.from_url(settings.broker.url, decode_responses=True))
    with _LOCK:
        if _LOCAL_BUDGETS is None:
            _LOCAL_BUDGETS = LocalBudgets()
        return _LOCAL_BUDGETS


def _gate(settings: Settings, budgets: ModelBudgets, endpoint: LLMEndpoint) -> Gate:
    llm = settings.llm
    return Gate(
        budgets,
        endpoint_id(endpoint),
        limits_of(endpoint, llm),
        wait_s=llm.budget_wait_s,
        patient_s=settings.broker.soft_time_limit / 2,  # a task under way waits, within limits
        hold_s=llm.backoff_s,
    )


def make_backend(settings: Settings) -> LLMBackend:
    """The configured backend, per role (`llm.extractor_role`, `llm.general_role`). `openai`:
    over HTTP (an `extractor` left at its defaults uses the `general` endpoint and budget).
    `vllm`: the extractor in-process on this worker's GPU, created on its first call. A role
    on `rules` beside a model role: a `RoleBackend` sends each stage to its role's backend."""
    llm = settings.llm
    extractor_role, general_role = llm.extractor_role, llm.general_role
    rules = RulesBackend(settings.rules, settings.memory)
    if extractor_role == general_role == "rules":
        return rules
    budgets = model_budgets(settings)
    general: Transport | None = None
    if general_role == "openai":
        general = OpenAITransport(
            llm.general, llm, "general", _gate(settings, budgets, llm.general)
        )
    extractor: Transport | None = None
    if extractor_role == "vllm":
        from common.llm.vllm_engine import VLLMTransport  # the engine itself loads lazily

        extractor = VLLMTransport(llm.vllm, llm.temperature, llm.seed)
    elif extractor_role == "openai":
        if general is not None and llm.extractor_endpoint is llm.general:
            extractor = general
        else:
            gate = _gate(settings, budgets, llm.extractor)
            extractor = OpenAITransport(llm.extractor, llm, "extractor", gate)
    # A role on `rules` leaves one transport unset; the model backend never calls it then
    # (the RoleBackend sends that role's stages to `rules`), so the other stands in.
    first = extractor or general
    assert first is not None  # at least one role is a model's
    model = ModelBackend(
        llm.backend_name, llm, settings.memory, extractor or first, general or first
    )
    if extractor is None:
        return RoleBackend(llm.backend_name, extractor=rules, general=model)
    if general is None:
        return RoleBackend(llm.backend_name, extractor=model, general=rules)
    return model


def _one_blas_thread() -> None:
    """numpy's BLAS on one thread in this process. Its products here are matrix-vector or
    thin matrix-matrix, bound by memory (a 100k-row scan: 5.4 ms on one thread, 4.5 on two),
    while a second OpenBLAS thread spins between calls on the core the embedding model's
    threads need: ingest on 2 cores went 76.8/79.6 -> 87.0/84.9 facts/s in one A/B run."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def build_context(settings: Settings | None = None) -> MemoryContext:
    """A memory context with its own store, the process's embedder and the configured backend."""
    settings = settings or get_settings()
    graph = settings.graph
    _one_blas_thread()

    def build_graph(index: SpaceIndex) -> None:
        """Saved indexes carry the recall graph's channels (see MemoryContext.before_save)."""
        channels(index, graph)

    return MemoryContext(
        settings=settings,
        store=open_store(settings.store, settings.embedding.dimension),
        embedder=LazyEmbedder(settings.embedding),
        backend=make_backend(settings),
        before_save=build_graph,
    )
