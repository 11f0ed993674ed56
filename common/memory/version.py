"""The memory version: what builds memory in this process (extractor, models, prompt versions,
the settings that shape memory), stamped on every fact, event and profile a stage writes."""

from __future__ import annotations

import threading
from pathlib import Path

from common.llm.prompts import (
    event_link,
    event_summary,
    extract,
    metadata,
    profile_extract,
    profile_update,
    verify,
)
from common.models import ids
from common.models.memory import MemoryVersion
from common.settings import Settings

# The prompts of memory construction (the answer, intent and judge prompts only read it).
PROMPTS = (extract, metadata, verify, event_link, event_summary, profile_extract, profile_update)

_cache: dict[int, tuple[Settings, MemoryVersion]] = {}
_lock = threading.Lock()


def shaping_settings(settings: Settings) -> dict[str, object]:
    """The settings that change what memory holds: construction, similarity, the `rules`
    thresholds, the embedding model, the LLM backend's models and sampling, and the prompt
    versions. Secrets, endpoints, timeouts, retries and budgets are left out: they change
    how, not what."""
    llm = settings.llm
    return {
        "memory": settings.memory.model_dump(mode="json"),
        "similarity": settings.similarity.model_dump(mode="json"),
        "rules": settings.rules.model_dump(mode="json"),
        "embedding": {
            # by name: the same model mounted at other paths is the same model
            "model": _name(settings.embedding.model_path) or "all-MiniLM-L6-v2 (packaged)",
            "dimension": settings.embedding.dimension,
        },
        "extract_batch_turns": settings.pipeline.extract_batch_turns,
        "llm": {
            # the roles' combination: a `backend` alone hashes as it always did
            "backend": llm.backend_name,
            "extractor": llm.extractor.model,
            "general": llm.general.model,
            "vllm": _name(llm.vllm.model),
            "lora": _name(llm.vllm.lora_path),
            "temperature": llm.temperature,
            "seed": llm.seed,
            "max_tokens": llm.max_tokens,
            "metadata_batch": llm.metadata_batch,
            "skip_rules": llm.skip_rules,
        },
        "prompts": {p.STAGE: p.VERSION for p in PROMPTS},
    }


def _name(where: object) -> str | None:
    """A model's name without the directory it is mounted in (a hub id stays whole)."""
    if where is None:
        return None
    text = str(where)
    return Path(text).name if text.startswith(("/", ".", "~")) else text


def compute(settings: Settings) -> MemoryVersion:
    """The memory version these settings build."""
    llm = settings.llm
    general = "rules" if llm.general_role == "rules" else llm.general.model
    if llm.extractor_role == "rules":
        extractor = "rules"
    elif llm.extractor_role == "vllm":
        extractor = _name(llm.vllm.model) or llm.vllm.model  # no local path to tenants
        if llm.vllm.lora_path is not None:
            extractor += f"+{llm.vllm.lora_path.name}"
    else:
        extractor = llm.extractor_endpoint.model  # the model that answers, shared or its own
    return MemoryVersion(
        extractor_backend=llm.extractor_role,
        extractor_model=extractor,
        general_model=general,
        prompts={p.STAGE: p.VERSION for p in PROMPTS},
        settings_hash=ids.content_hash(shaping_settings(settings))[:12],
    )


def memory_version(settings: Settings) -> MemoryVersion:
    """`compute(settings)`, once per settings object (a process has one)."""
    key = id(settings)
    with _lock:
        found = _cache.get(key)
        if found is None or found[0] is not settings:
            found = _cache[key] = (settings, compute(settings))
        return found[1]
