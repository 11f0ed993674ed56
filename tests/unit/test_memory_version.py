"""The memory version: what it hashes, where it is stamped, and the space comparison."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from common.memory.changes import Changes
from common.memory.commit import commit_facts, profile_batch
from common.memory.compare import UNVERSIONED, compare, normalised, profile_diffs, side
from common.memory.version import compute, memory_version
from common.models.memory import Fact, Profile
from common.settings import Settings
from tests.helpers.contexts import make_ctx
from tests.helpers.doubles import TableEncoder, unit
from tests.helpers.records import draft, session_record, stored_fact


def _with(settings: Settings, section: str, **values: object) -> Settings:
    part = getattr(settings, section).model_copy(update=values)
    return settings.model_copy(update={section: part})


def test_the_version_names_backend_models_prompts_and_a_settings_hash() -> None:
    version = compute(Settings())
    assert (version.extractor_backend, version.extractor_model, version.general_model) == (
        "rules",
        "rules",
        "rules",
    )
    assert version.prompts["extract"] == "1" and "answer" not in version.prompts
    assert len(version.settings_hash) == 12
    assert version.label == f"rules:rules@{version.settings_hash}"
    assert compute(Settings()) == version  # deterministic


def test_memory_shaping_settings_change_the_hash_and_the_rest_do_not() -> None:
    base = Settings()
    same = compute(base).settings_hash
    values: Mapping[str, object]
    for section, values in (
        ("memory", {"duplicate_threshold": 0.9}),
        ("similarity", {"lexical": "jaccard"}),
        ("rules", {"event_link_threshold": 0.5}),
        ("llm", {"backend": "openai"}),
    ):
        assert compute(_with(base, section, **values)).settings_hash != same, section
    for section, values in (
        ("llm", {"timeout_s": 5.0, "max_attempts": 1}),
        ("broker", {"url": "redis://elsewhere:6379/0"}),
        ("retrieval", {"final_top_k": 3}),
        ("api", {"query_timeout_s": 1.0}),
    ):
        assert compute(_with(base, section, **values)).settings_hash == same, section
    endpoint = base.llm.extractor.model_copy(
        update={"api_key": "sk-secret", "base_url": "http://x"}
    )
    assert compute(_with(base, "llm", extractor=endpoint)).settings_hash == same


def test_model_backends_name_their_models() -> None:
    base = Settings()
    extractor = base.llm.extractor.model_copy(update={"model": "fact-executor-8b"})
    general = base.llm.general.model_copy(update={"model": "gpt-4o"})
    openai = compute(_with(base, "llm", backend="openai", extractor=extractor, general=general))
    assert (openai.extractor_model, openai.general_model) == ("fact-executor-8b", "gpt-4o")
    assert openai.label.startswith("openai:fact-executor-8b+gpt-4o@")
    vllm_cfg = base.llm.vllm.model_copy(update={"model": "Qwen", "lora_path": Path("/m/sft-v2")})
    vllm = compute(_with(base, "llm", backend="vllm", vllm=vllm_cfg, general=general))
    assert vllm.extractor_model == "Qwen+sft-v2"


def test_a_prompt_version_and_where_a_model_is_mounted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new prompt is a new version (its label too); the same model at another path is not,
    and no local path reaches the version that tenants read."""
    from common.llm.prompts import verify

    before = compute(Settings())
    monkeypatch.setattr(verify, "VERSION", "2")
    bumped = compute(Settings())
    assert bumped.prompts["verify"] == "2" and bumped.label != before.label
    monkeypatch.undo()
    base = Settings()
    here = base.llm.vllm.model_copy(update={"model": "/models/qwen-7b"})
    there = base.llm.vllm.model_copy(update={"model": "/mnt/cache/qwen-7b"})
    a = compute(_with(base, "llm", backend="vllm", vllm=here))
    b = compute(_with(base, "llm", backend="vllm", vllm=there))
    assert a == b and a.extractor_model == "qwen-7b" and "/" not in a.model_dump_json()


def test_records_share_one_instance_of_each_version() -> None:
    version = compute(Settings())
    payload = stored_fact("f1", "Ann paints.").model_dump(mode="json")
    payload["memory_version"] = version.model_dump(mode="json")
    first, second = Fact.model_validate(payload), Fact.model_validate(payload)
    assert first.memory_version == version
    assert first.memory_version is second.memory_version


def test_the_version_is_computed_once_per_settings_object() -> None:
    settings = Settings()
    assert memory_version(settings) is memory_version(settings)


def test_records_stored_before_versions_still_load() -> None:
    payload = stored_fact("f1", "Ann paints.").model_dump(mode="json")
    del payload["memory_version"]
    assert Fact.model_validate(payload).memory_version is None


def test_changes_stamp_what_they_record_and_the_plan_carries_it() -> None:
    version = compute(Settings())
    fact = stored_fact("f1", "Ann paints.")
    changes = Changes(version=version)
    changes.fact(fact, unit(1, 0, 0, 0))
    assert fact.memory_version == version  # in place: the index holds the same record
    (point,) = changes.plan().points
    assert cast(dict[str, Any], point.payload["memory_version"])["settings_hash"] == (
        version.settings_hash
    )
    plain = stored_fact("f2", "Ann runs.")
    Changes().fact(plain, unit(0, 1, 0, 0))
    assert plain.memory_version is None


def test_a_commit_stamps_new_records_and_a_rewrite_takes_the_rewriters_version(
    tmp_path: Path,
) -> None:
    paints, runs = "Ann paints landscapes.", "Ann runs marathons."
    encoder = TableEncoder({paints: unit(1, 0, 0, 0), runs: unit(0, 1, 0, 0)})
    ctx = make_ctx(tmp_path, encoder, scripted=False)
    first = memory_version(ctx.settings)
    r1 = session_record("s1", 0, datetime(2024, 3, 4, 10), ["Ann"])
    drafts = [
        draft(r1, paints, unit(1, 0, 0, 0), ["paint"], ["Ann"], index=0, profile=True),
        draft(r1, runs, unit(0, 1, 0, 0), ["run"], ["Ann"], index=1),
    ]
    commit_facts(ctx, r1, drafts)
    profile_batch(ctx, r1)
    index = ctx.index("t", "s")
    assert [f.memory_version for f in index.facts.items()] == [first, first]
    profiles = index.profiles.items()
    assert profiles and all(p.memory_version == first for p in profiles)

    # another process (other memory settings) commits a duplicate of the first fact: the
    # fact it rewrites takes its version, the untouched one keeps the first
    ctx.settings = _with(ctx.settings, "memory", context_window_k=2)
    second = memory_version(ctx.settings)
    assert second != first
    r2 = session_record("s2", 1, datetime(2024, 3, 9, 10), ["Ann"])
    commit_facts(ctx, r2, [draft(r2, paints, unit(1, 0, 0, 0), ["paint"], ["Ann"])])
    ctx.indexes.drop("t", "s")  # what the store holds
    by_text = {f.text: f for f in ctx.index("t", "s").facts.items()}
    assert len(by_text[paints].also_from) == 1
    assert by_text[paints].memory_version == second
    assert by_text[runs].memory_version == first


def _profile(pid: str, person: str, content: str) -> Profile:
    return Profile(
        id=pid, tenant="t", space="s", person=person, content=content, keywords=[],
        evidence_fact_ids=[], t_from=date(2024, 1, 1),
    )  # fmt: skip


def test_compare_matches_facts_by_normalised_text() -> None:
    assert normalised("  Ann  paints, Landscapes! ") == "ann paints landscapes"
    version = compute(Settings())
    a_facts = [stored_fact("a1", "Ann paints."), stored_fact("a2", "Ann runs marathons.")]
    b_facts = [stored_fact("b1", "ann PAINTS"), stored_fact("b2", "Ann swims."),
               stored_fact("b3", "Ann sings."), stored_fact("b4", "Ann sings!")]  # fmt: skip
    for fact in b_facts:
        fact.memory_version = version
    a = side("A", {"facts": 2}, a_facts, [], [])
    b = side("B", {"facts": 4}, b_facts, [], [])
    assert a.versions == {UNVERSIONED: {"facts": 2}}
    assert b.versions == {version.label: {"facts": 4}}
    assert b.version_details[version.label] == version
    result = compare(a, b, a_facts, b_facts, [], [], show=1)
    assert (result.facts_shared, result.facts_only_a, result.facts_only_b) == (1, 1, 2)
    assert result.examples_only_a == ["Ann runs marathons."]
    assert result.examples_only_b == ["Ann swims."]  # the first of two, in the space's order


def test_profile_differences_are_per_person_and_by_content() -> None:
    a = [_profile("1", "Ann", "Ann lives in Boston."), _profile("2", "Bo", "Bo likes jazz.")]
    b = [_profile("3", "Ann", "ann lives in boston"), _profile("4", "Ann", "Ann owns a cat."),
         _profile("5", "Cy", "Cy paints.")]  # fmt: skip
    diffs = {d.person: (d.only_a, d.only_b) for d in profile_diffs(a, b)}
    assert diffs == {
        "Ann": ([], ["Ann owns a cat."]),
        "Bo": (["Bo likes jazz."], []),
        "Cy": ([], ["Cy paints."]),
    }
