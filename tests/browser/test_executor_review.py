"""The Fact Executor's SFT chain through the inspector, in headless Chromium: samples taught by
a scripted teacher, reviewed from the keyboard at /ui/#/review (accept, edit, drop, split,
exclude), the decisions stored and counted, then exported and trained on a tiny model.
`atommem serve` holds the review (no Redis, no worker). The tests run in file order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from common.executor import train
from common.executor.dataset import read_split
from common.executor.review import decisions_path
from common.executor.samples import read_samples
from tests.helpers import tiny_lm
from tests.helpers.browser import sign_in
from tests.helpers.cli import run
from tests.helpers.samples import SAMPLE
from tests.helpers.serve import Served, serving
from tests.helpers.teacher import teacher

if TYPE_CHECKING:
    from playwright.sync_api import Page

TURNS = 20


def expect(target: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


@pytest.fixture(scope="module")
def served(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("review") / "data"
    with teacher() as server:
        taught = run(data, "executor", "teach", str(SAMPLE), "--teacher", server.base_url)
        assert taught.returncode == 0, taught.stderr
    with serving(data) as running:
        yield running


def samples_file(served: Served) -> Path:
    return served.key_file.parent / "executor" / "samples.jsonl"


def api(served: Served, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {served.key()}"}
    return httpx.request(method, f"{served.url}{path}", headers=headers, timeout=30, **kw)


def test_a_reviewer_decides_from_the_keyboard(served: Served, page: Page) -> None:
    sign_in(page, served.url, served.key(), "#/review")
    head = page.locator(".review h1")
    expect(head).to_have_text(f"Review · sample 1 of {TURNS}")
    expect(page.locator(".dialogue .target")).to_have_text("Tom: Hi Priya! How was your week?")
    page.fill("#reviewer", "rita")
    page.locator(".review-fact").first.focus()
    page.keyboard.press("a")
    page.keyboard.press("Control+Enter")  # saved: the next unreviewed sample opens

    expect(head).to_have_text(f"Review · sample 2 of {TURNS}")
    facts = page.locator(".review-fact")
    expect(facts).to_have_count(3)
    facts.first.focus()
    page.keyboard.press("d")  # filter
    expect(facts.nth(0)).to_have_attribute("data-action", "drop")
    page.keyboard.press("j")
    page.keyboard.press("e")  # refine: the text takes the focus
    edited = "Priya started a pottery class at the community studio."
    facts.nth(1).locator("textarea").fill(edited)
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    page.keyboard.press("s")  # decompose: one fact a line
    expect(facts.nth(2)).to_have_attribute("data-action", "split")
    parts = "Priya's first bowl came out lopsided.\nPriya loved her first bowl."
    facts.nth(2).locator("textarea").fill(parts)
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Enter")

    expect(head).to_have_text(f"Review · sample 3 of {TURNS}")
    page.locator(".review-fact").first.focus()
    page.keyboard.press("x")  # the whole sample left out
    page.keyboard.press("Control+Enter")
    expect(head).to_have_text(f"Review · sample 4 of {TURNS}")
    counts = page.locator(".review-counts")
    expect(counts).to_contain_text("3 of 20 samples reviewed · 1 excluded · accept 1 · edit 1")
    expect(counts).to_contain_text("drop 1 · split 1 · 3 decisions logged")

    log = [
        json.loads(line) for line in decisions_path(samples_file(served)).read_text().splitlines()
    ]
    assert [d["reviewer"] for d in log] == ["rita"] * 3
    assert [f["action"] for f in log[1]["facts"]] == ["drop", "edit", "split"]
    assert log[1]["facts"][1]["texts"] == [edited]
    assert log[1]["facts"][2]["texts"] == parts.split("\n")
    assert log[2]["excluded"] is True

    page.keyboard.press("p")  # back to a decided sample: its decision is shown
    expect(head).to_have_text(f"Review · sample 3 of {TURNS}")
    expect(page.locator(".review")).to_contain_text("last decided by rita")
    expect(page.locator("#exclude")).to_be_checked()


def test_a_decision_that_does_not_fit_is_refused(served: Served) -> None:
    sample = read_samples(samples_file(served))[5]
    body = {"reviewer": "rita", "facts": []}
    wrong = api(served, "POST", f"/v1/executor/samples/{sample.id}/decisions", json=body)
    assert wrong.status_code == 422
    assert f"has {len(sample.facts)} facts; the decision covers 0" in wrong.json()["detail"]
    missing = api(served, "POST", "/v1/executor/samples/nope/decisions", json=body)
    assert missing.status_code == 404


def test_the_reviewed_samples_export_and_train(served: Served, tmp_path: Path) -> None:
    """The rest accepted through the API, then the export and a short LoRA run."""
    page = api(served, "GET", "/v1/executor/samples", params={"state": "unreviewed", "limit": 100})
    for item in page.json()["items"]:
        verdict = {
            "reviewer": "sam",
            "facts": [{"action": "accept", "texts": [f]} for f in item["facts"]],
        }
        sent = api(served, "POST", f"/v1/executor/samples/{item['id']}/decisions", json=verdict)
        assert sent.status_code == 201, sent.text
    summary = api(served, "GET", "/v1/executor/summary").json()
    assert (summary["reviewed"], summary["excluded"]) == (TURNS, 1)
    assert summary["reviewers"] == {"rita": 3, "sam": TURNS - 3}
    data = tmp_path / "sft"
    args = ["executor", "export", "--samples", str(samples_file(served)), "--out", str(data)]
    exported = run(tmp_path, *args, "--json")
    assert exported.returncode == 0, exported.stderr
    stats = json.loads(exported.stdout)
    assert stats["splits"]["train"]["samples"] == TURNS - 1  # one conversation: all train
    records = read_split(data / "train.jsonl")
    model = tiny_lm.build(tmp_path / "tiny", [m["content"] for r in records for m in r.messages])
    config = train.TrainConfig(
        model=str(model), data=data, out=tmp_path / "run", rank=8, alpha=16,
        learning_rate=1e-2, batch_size=4, grad_accum=1, epochs=1, max_length=768,
    )  # fmt: skip
    result = train.train(config, quiet=True)
    assert (result.adapter / "adapter_config.json").is_file() and result.steps > 0
