"""`atommem serve`'s keys: tenants and keys in a SQLite file, writes per minute in the process,
and the first start's key."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from api.auth import LocalKeys
from cli.serve import first_key
from common.errors import Conflict, NotFound
from common.models.responses import KeyList, NewKey, TenantList


def test_keys_identify_their_tenant_until_revoked_and_survive_a_reopen(tmp_path: Path) -> None:
    keys = LocalKeys(tmp_path / "keys.sqlite", admin_key="the-admin")
    keys.create_tenant("acme")
    with pytest.raises(Conflict):
        keys.create_tenant("acme")
    made = NewKey.model_validate(keys.create_key("acme"))
    assert keys.identify(made.api_key) is not None
    assert keys.identify("amk_unknown") is None
    admin = keys.identify("the-admin")
    assert admin is not None and admin.admin and admin.tenant is None
    keys.close()

    again = LocalKeys(tmp_path / "keys.sqlite", admin_key=None)
    who = again.identify(made.api_key)
    assert who is not None and who.tenant == "acme" and who.key_id == made.key_id
    assert again.identify("the-admin") is None  # no admin key set now
    listed = KeyList.model_validate({"items": again.list_keys("acme")}).items
    assert [k.key_id for k in listed] == [made.key_id]
    tenants = TenantList.model_validate({"items": again.tenants()}).items
    assert [t.name for t in tenants] == ["acme"] and tenants[0].created_at.tzinfo is not None
    again.revoke_key("acme", made.key_id)
    assert again.identify(made.api_key) is None
    with pytest.raises(NotFound):
        again.revoke_key("acme", made.key_id)
    with pytest.raises(NotFound):
        again.create_key("nobody")


def test_writes_per_minute_are_counted_and_refunded(tmp_path: Path) -> None:
    keys = LocalKeys(tmp_path / "keys.sqlite", admin_key=None)
    first, wait = keys.allow_write("acme", per_minute=2)
    assert wait is None
    assert keys.allow_write("acme", per_minute=2)[1] is None
    refused, wait = keys.allow_write("acme", per_minute=2)
    assert wait is not None and 0 < wait <= 60
    assert keys.allow_write("other", per_minute=2)[1] is None  # per tenant
    keys.refund_write(first)
    assert keys.allow_write("acme", per_minute=2)[1] is None


def test_the_first_start_makes_a_key_only_its_owner_reads(tmp_path: Path) -> None:
    keys = LocalKeys(tmp_path / "keys.sqlite", admin_key=None)
    key_file = tmp_path / "api_key"
    note = first_key(keys, "default", key_file)
    key = key_file.read_text().strip()
    assert key in note and "tenant 'default' created" in note
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    who = keys.identify(key)
    assert who is not None and who.tenant == "default"
    later = first_key(keys, "default", key_file)
    assert key not in later and str(key_file) in later
    assert len(keys.list_keys("default")) == 1  # no second key on a later start
