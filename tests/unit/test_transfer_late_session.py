"""A copy whose source starts a commit while it runs writes no space record on the target."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from common.models.session import SessionRecord
from common.settings import StoreSettings
from common.store import records
from common.store.backends import open_store
from common.store.base import Kind
from common.store.transfer import TransferError, copy_space
from tests.helpers.contexts import OPEN_STORES
from tests.helpers.records import session_record


def _done(record: SessionRecord) -> SessionRecord:
    return record.model_copy(update={"status": "done"})


def test_a_session_that_starts_committing_during_the_copy_stops_it(tmp_path: Path) -> None:
    source = open_store(StoreSettings(qdrant_path=tmp_path / "a"), 4)
    target = open_store(StoreSettings(qdrant_path=tmp_path / "b"), 4)
    OPEN_STORES.extend([source, target])
    records.create_space(source, "t", "s")
    records.put_session(source, _done(session_record("s1", 1, datetime(2024, 3, 1), ["Ann"])))

    def a_stage_begins(kind: Kind, done: int, total: int) -> None:
        if kind == Kind.FACTS and done == 0:  # sessions are copied; now a stage starts
            again = session_record("s1", 1, datetime(2024, 3, 1), ["Ann"])  # committing
            records.put_session(source, again)  # every count stays the same

    with pytest.raises(TransferError, match="began committing during the copy"):
        copy_space(source, target, "t", "s", on_progress=a_stage_begins)
    assert records.get_space(target, "t", "s") is None
    # once it is done, copying again completes (the leftovers are cleared first)
    records.put_session(source, _done(session_record("s1", 1, datetime(2024, 3, 1), ["Ann"])))
    copy_space(source, target, "t", "s")
    assert records.get_space(target, "t", "s") is not None
    assert target.count(Kind.SESSIONS, "t", "s") == 1
