"""Per-process worker state: settings, the memory context and the coordination roles, built
lazily."""

from __future__ import annotations

import threading

from common.context import MemoryContext
from common.priority import questions
from common.settings import Settings, get_settings
from common.store.coordination.roles import Coordination
from workers.wiring import build_context

_LOCK = threading.Lock()
_settings: Settings | None = None
_context: MemoryContext | None = None
_coord: Coordination | None = None


def configure(settings: Settings) -> None:
    """Use these settings instead of the environment's (the CLI's --data-dir, tests)."""
    global _settings
    reset()
    _settings = settings


def settings() -> Settings:
    return _settings or get_settings()


def coordination() -> Coordination:
    """The process's coordination roles: Redis with a broker, else the SQLite journal."""
    global _coord
    with _LOCK:
        if _coord is None:
            _coord = Coordination.for_settings(settings())
        return _coord


def context() -> MemoryContext:
    """The process's memory context; opens the store on first use (never before a fork)."""
    global _context
    coord = coordination()
    with _LOCK:
        if _context is None:
            _context = build_context(settings())
            _context.versions = coord.versions
            questions.longest_wait = settings().broker.question_yield_s
        return _context


def reset() -> None:
    """Drop per-process clients (after a fork, or when settings change)."""
    global _context, _coord
    with _LOCK:
        if _context is not None:
            _context.close()  # saves the changed indexes of large spaces, closes the store
        if _coord is not None:
            _coord.close()
        _context = None
        _coord = None
