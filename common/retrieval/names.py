"""The question's vector for S_h, moved away from the names of the participants it names.

A name weighs heavily in a sentence embedding, and every fact about a person carries that
person's name, so the name's direction in the question's vector ranks all of that person's
facts alike. The participant filter already says whose facts count; what is asked should
rank them. The vector that ranks memory is therefore the question's embedding less a share
w of its projection on the span of the named participants' own embeddings:

    v_Q = v − w · U Uᵀ v        U: an orthonormal basis of the names' vectors

v_Q is not renormalised: for a question that names someone it is shorter than v (0.8 to 0.9
with w = 0.5), so its dense term weighs a little less beside the lexical one. Renormalised,
the same w gave about the same recall on LoCoMo (bench/README.md, "The question's vector").

A name is embedded once per process and kept (the last `CACHED_NAMES` names per encoder);
the first question naming someone embeds the name in the same batch as the question.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from common.retrieval.caches import PerEncoder

CACHED_NAMES = 1024


class NameVectors:
    """Embeddings of participant names, kept per process for the last `capacity` names."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()

    def with_names(
        self, text: str, names: Sequence[str], encode: Callable[[list[str]], np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The embedding of `text` and the vectors of `names` (one row each, in order), in one
        call to `encode` that embeds `text` and the names not kept yet."""
        wanted = list(dict.fromkeys(names))
        with self._lock:
            found = {n: self._kept[n] for n in wanted if n in self._kept}
        missing = [n for n in wanted if n not in found]
        vectors = encode([text, *missing])
        found.update(zip(missing, vectors[1:], strict=True))
        with self._lock:
            for name in wanted:
                self._kept[name] = found[name]
                self._kept.move_to_end(name)
            while len(self._kept) > self._capacity:
                self._kept.popitem(last=False)
        return vectors[0], np.stack([found[n] for n in wanted])


def away_from(vector: np.ndarray, names: np.ndarray, weight: float) -> np.ndarray:
    """`vector` less `weight` times its projection on the span of the rows of `names`."""
    if weight <= 0 or names.size == 0:
        return vector
    u, s, _ = np.linalg.svd(names.T.astype(np.float64), full_matrices=False)
    # two names whose vectors nearly coincide give one direction, not their small difference
    basis = u[:, s > s[0] * 1e-2]
    v = vector.astype(np.float64)
    out: np.ndarray = (v - weight * (basis @ (basis.T @ v))).astype(vector.dtype)
    return out


# name_vectors(encoder): the process's cache of name vectors for that encoder
name_vectors = PerEncoder(lambda: NameVectors(CACHED_NAMES))
