"""A write plan: the points of one commit stage, recorded before they are written.

Vectors are recorded packed (base64 of their little-endian float32 bytes): exact, and a
quarter of the size of a JSON list of the same floats. Drafts travel between tasks packed too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where vectors are packed, not here: the API imports these models and
# runs without the worker stack (tests/unit/test_api_slim.py).
_FLOAT32_BYTES = 4


def pack_vector(vector: np.ndarray | Sequence[float]) -> str:
    """A one-dimensional vector as base64 of its little-endian float32 bytes."""
    import numpy as np

    array = np.asarray(vector, dtype=np.dtype("<f4"))
    if array.ndim != 1:
        raise ValueError(f"a vector has one dimension, not {array.ndim}")
    return base64.b64encode(array.tobytes()).decode("ascii")


def unpack_vector(packed: str) -> np.ndarray:
    """The float32 vector `pack_vector` packed, bit for bit."""
    import numpy as np

    return np.frombuffer(base64.b64decode(packed), dtype=np.dtype("<f4")).astype(np.float32)


def _packed(value: object) -> object:
    """Numbers are packed; a string must already be a packed vector."""
    if isinstance(value, list | tuple) or type(value).__module__ == "numpy":
        return pack_vector(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise ValueError("not a packed vector (base64 of float32 bytes)") from None
        if len(raw) % _FLOAT32_BYTES:
            raise ValueError(f"a packed vector of {len(raw)} bytes is not whole float32s")
    return value


PackedVector = Annotated[
    str,
    BeforeValidator(_packed),
    WithJsonSchema(
        {"type": "string", "contentEncoding": "base64", "description": "little-endian float32"}
    ),
]


class PlannedPoint(BaseModel):
    kind: str
    id: str
    payload: dict[str, object]
    vector: PackedVector | None = None


class Plan(BaseModel):
    """Re-applying a plan is harmless: same ids, same payloads."""

    points: list[PlannedPoint] = Field(default_factory=list)
