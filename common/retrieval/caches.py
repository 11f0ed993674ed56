"""Caches of vectors kept per encoder object, so that the vectors of two models never mix and
a cache goes away with its encoder."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

C = TypeVar("C")


class PerEncoder(Generic[C]):
    """`cache(encoder)`: this process's cache for `encoder`, made by `make` on first use."""

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._caches: weakref.WeakKeyDictionary[object, C] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, encoder: object) -> C:
        with self._lock:
            cache = self._caches.get(encoder)
            if cache is None:
                cache = self._caches[encoder] = self._make()
            return cache
