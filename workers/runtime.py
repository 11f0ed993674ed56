"""Per-process worker state: settings, the memory context and the coordinator, built lazily."""

from __future__ import annotations

import threading

from common.deps import build_context
from common.memory.context import MemoryContext
from common.settings import Settings, get_settings
from common.store.coordination import Coordinator, RedisCoordinator, SqliteCoordinator

_LOCK = threading.Lock()
_settings: Settings | None = None
_context: MemoryContext | None = None
_coord: Coordinator | None = None


def configure(settings: Settings) -> None:
    """Use these settings instead of the environment's (the CLI's --data-dir, tests)."""
    global _settings
    reset()
    _settings = settings


def settings() -> Settings:
    return _settings or get_settings()


def make_coordinator(cfg: Settings) -> Coordinator:
    if cfg.broker.url:
        return RedisCoordinator(cfg.broker.url, cfg.pipeline.job_ttl_s)
    return SqliteCoordinator(cfg.pipeline.coordination_path)


def coordinator() -> Coordinator:
    global _coord
    with _LOCK:
        if _coord is None:
            _coord = make_coordinator(settings())
        return _coord


def context() -> MemoryContext:
    """The process's memory context; opens the store on first use (never before a fork)."""
    global _context
    coord = coordinator()
    with _LOCK:
        if _context is None:
            _context = build_context(settings())
            _context.versions = coord
        return _context


def reset() -> None:
    """Drop per-process clients (after a fork, or when settings change)."""
    global _context, _coord
    with _LOCK:
        if _context is not None:
            _context.store.close()
        close = getattr(_coord, "close", None)
        if close is not None:
            close()
        _context = None
        _coord = None
