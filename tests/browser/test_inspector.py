"""The web inspector (`/ui`) as a person uses it, in headless Chromium: sign-in, every view on
the ingested sample, erasure with its receipt, tenancy, markup in memory, and a missing
worker. The tests run in file order: the erasures come last."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.helpers.browser import SPACE, XSS, Seeded, api_without_workers, sign_in, tenant_key
from tests.helpers.redis import shared_url
from tests.helpers.stack import ADMIN_KEY, Stack

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.integration

NO_WORKER_REDIS = shared_url(f"{__name__}:no-workers")


def expect(target: Locator | Page) -> Any:
    """Playwright's waiting assertions (imported here: the fixtures skip where it is absent)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def facts(stack: Stack, key: str) -> list[dict[str, Any]]:
    reply = httpx.get(
        f"{stack.url}/v1/spaces/{SPACE}/facts",
        params={"limit": 1000},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    return list(reply.json()["items"])


def view(page: Page, stack: Stack, route: str) -> None:
    page.goto(f"{stack.url}/ui/#/spaces/{SPACE}/{route}")


def test_the_page_is_served_with_a_policy_that_runs_only_its_own_files(stack: Stack) -> None:
    moved = httpx.get(f"{stack.url}/ui")
    assert moved.status_code in (307, 308) and moved.headers["location"].endswith("/ui/")
    page = httpx.get(f"{stack.url}/ui/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    script = httpx.get(f"{stack.url}/ui/js/app.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    missing = httpx.get(f"{stack.url}/ui/nothing.js")
    assert missing.status_code == 404 and list(missing.json()) == ["detail"]
    assert "/ui" not in str(httpx.get(f"{stack.url}/openapi.json").json()["paths"])


def test_a_wrong_key_shows_the_sign_in_error(stack: Stack, page: Page) -> None:
    page.goto(f"{stack.url}/ui/")
    page.fill("#key", "amk_not-a-key")
    page.click("form.signin button[type=submit]")
    error = page.locator("form.signin .error")
    expect(error).to_contain_text("unknown or revoked API key")
    expect(error).to_contain_text("401")
    assert page.evaluate("sessionStorage.length") == 0
    expect(page.locator("#sign-out")).to_be_hidden()


def test_a_key_revoked_while_signed_in_leads_back_to_sign_in(stack: Stack, page: Page) -> None:
    key = stack.key("fleeting")
    sign_in(page, stack.url, key)
    expect(page.locator("#spaces")).to_contain_text("No spaces for this key.")
    with stack.admin() as admin:
        (listed,) = admin.get("/v1/admin/tenants/fleeting/keys").json()["items"]
        assert admin.delete(f"/v1/admin/tenants/fleeting/keys/{listed['key_id']}").is_success
    page.reload()
    expect(page.locator("form.signin .error")).to_contain_text("unknown or revoked API key")
    assert page.evaluate("sessionStorage.length") == 0


def test_the_admin_key_is_refused_at_sign_in(stack: Stack, page: Page) -> None:
    page.goto(f"{stack.url}/ui/")
    page.fill("#key", ADMIN_KEY)
    page.click("form.signin button[type=submit]")
    expect(page.locator("form.signin .error")).to_contain_text("use a tenant's key")


def test_sign_in_shows_the_spaces_and_recent_jobs(stack: Stack, seeded: Seeded, page: Page) -> None:
    sign_in(page, stack.url, seeded.key)
    rows = page.locator("#spaces tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("td").first).to_have_text(SPACE)
    expect(rows.first.locator("td.n").first).to_have_text("5")  # sessions

    jobs = page.locator("#jobs tbody tr")
    expect(jobs).to_have_count(5)
    assert jobs.locator("td:nth-child(3)").all_inner_texts() == ["s5", "s4", "s3", "s2", "s1"]
    assert set(jobs.locator(".badge").all_inner_texts()) == {"done"}
    expect(page.locator("#jobs .live")).to_contain_text("live: read")
    assert "null" not in page.locator("#jobs").inner_text()  # one page of jobs: no pager
    # s5: three facts in, one stored, one duplicate dropped, one update
    assert jobs.first.locator("td.n").all_inner_texts()[:4] == ["3", "1", "1", "1"]

    rows.first.locator("a").click()
    expect(page).to_have_url(f"{stack.url}/ui/#/spaces/{SPACE}/timeline")
    expect(page.locator(".space-title h1")).to_have_text(SPACE)


def test_the_timeline_shows_facts_produced_updated_and_dropped(
    stack: Stack, seeded: Seeded, page: Page
) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/timeline")
    cards = page.locator("article.session")
    expect(cards).to_have_count(5)
    assert cards.locator("h2 code").all_inner_texts() == ["s1", "s2", "s3", "s4", "s5"]

    s1 = page.locator('[data-session-id="s1"]')
    beagle = s1.locator(".produced li.fact", has_text="Tom adopted a beagle puppy")
    expect(beagle.locator(".turns-quoted")).to_contain_text("s1:3")
    expect(beagle.locator(".turns-quoted")).to_contain_text("I adopted a beagle puppy yesterday")

    s5 = page.locator('[data-session-id="s5"]')
    update = s5.locator(".updated li.update")
    expect(update).to_have_count(1)
    expect(update.locator("del")).to_have_text(
        "Priya lives in Denver now, and Priya misses Anika a lot."
    )
    expect(update.locator("ins")).to_have_text(
        "Priya lives in Aurora now, and Priya misses Anika a lot."
    )
    expect(update.locator(".turns-quoted")).to_contain_text("s5:2")
    dropped = s5.locator(".repeated li.duplicate")
    expect(dropped).to_have_count(1)
    expect(dropped).to_contain_text("Tom teaches chemistry at Lincoln High School.")
    expect(dropped).to_contain_text("already kept from s1")
    expect(s5.locator(".repeated")).to_contain_text("counted 1 duplicate dropped")

    # s3 stated what s5 later changed: its text as stated, and what it reads now
    s3 = page.locator('[data-session-id="s3"]')
    stated = s3.locator(".produced li.fact", has_text="Priya lives in Denver now")
    expect(stated.locator(".later")).to_contain_text("updated later by s5")
    expect(stated.locator(".fact-now")).to_have_text(
        "Priya lives in Aurora now, and Priya misses Anika a lot."
    )
    expect(s3.locator(".updated li")).to_have_count(0)


def test_events_show_their_summary_members_and_time_span(
    stack: Stack, seeded: Seeded, page: Page
) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/events")
    zion = page.locator("article.event", has_text="Zion National Park")
    expect(zion.locator(".when")).to_have_text("2024-05-01 → 2024-05-31")
    expect(zion.locator(".summary")).to_contain_text("hiking trip to Zion")
    members = zion.locator("li.member")
    expect(members).to_have_count(2)
    expect(members.filter(has_text="hiked The Narrows")).to_contain_text("s3:2")


def test_profiles_answer_what_we_believed_on_a_day(
    stack: Stack, seeded: Seeded, page: Page
) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/profiles")
    home = page.locator("article.profile", has_text="Priya lives in Boston with")
    expect(home.locator("li.version-item")).to_have_count(2)
    expect(home.locator("svg.strip g.version")).to_have_count(2)
    expect(home.locator("li.version-item.valid")).to_have_count(0)

    page.select_option("#person", "Priya")
    page.fill("#date", "2024-05-01")  # before the move: the earlier version
    valid = home.locator("li.version-item.valid")
    expect(valid).to_have_count(1)
    expect(valid).to_contain_text("Priya lives in Boston with Priya's sister Anika.")
    expect(valid).to_contain_text("2024-03-04 → 2024-06-02")
    expect(valid.locator(".evidence")).to_contain_text("(s1)")
    expect(home.locator("svg.strip g.version.valid")).to_have_count(1)
    believed = page.locator("#believed")
    expect(believed).to_contain_text("Priya lives in Boston with Priya's sister Anika.")
    expect(believed).not_to_contain_text("Tom")

    page.fill("#date", "2024-06-02")  # the day the current version starts
    expect(valid).to_contain_text("Priya lives in Denver now")
    expect(valid).to_contain_text("2024-06-02 → open")
    expect(believed).not_to_contain_text("Boston with")

    page.fill("#date", "2023-01-01")  # before anything was said
    expect(believed).to_contain_text("Nothing was known yet")
    expect(page.locator("li.version-item.valid")).to_have_count(0)
    assert "date=2023-01-01" in page.url and "person=Priya" in page.url


def test_search_shows_ranked_facts_stages_timings_and_the_recall_graph(
    stack: Stack, seeded: Seeded, page: Page
) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/search")
    page.fill("#question", "Where does Priya live?")
    page.click(".search-form button")
    hits = page.locator("li.hit")
    expect(hits.first).to_be_visible()
    assert hits.count() >= 3
    assert hits.first.locator(".stage dt").count() >= 1
    assert set(hits.locator(".stage dt").all_inner_texts()) <= {
        "primary", "compensatory", "fact_sh", "graph", "relevance",
    }  # fmt: skip
    expect(page.locator("#timings")).to_contain_text("total")
    expect(page.locator("#profiles-used li").first).to_contain_text("Priya")
    expect(page.locator("#events-used")).to_be_visible()

    graph = page.locator("svg.recall-graph")
    expect(graph).to_be_visible()
    assert graph.locator("g.node.seed").count() >= 1
    assert graph.locator("g.node.expanded").count() >= 1
    assert graph.locator("path.edge").count() >= 1
    channels = set(graph.locator("path.edge").evaluate_all("es => es.map(e => e.dataset.channel)"))
    assert channels and channels <= {"keyword", "event", "turn"}
    first = graph.locator('g.node[data-rank="0"]')
    expect(first.locator("text.rank")).to_have_text("1")
    first.click()
    top = hits.first.locator(".fact-text").inner_text()
    expect(page.locator(".node-info .node-text")).to_have_text(top)
    expect(hits.first).to_have_class("hit selected")
    expect(page.locator(".legend")).to_contain_text("keyword edge")

    page.select_option("#mode", "flat")
    page.click(".search-form button")
    expect(page.locator("#graph")).to_contain_text("No graph")
    assert "mode=flat" in page.url


def test_ask_answers_beside_the_evidence_it_cites(stack: Stack, seeded: Seeded, page: Page) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/search")
    page.fill("#question", "What did Tom adopt?")
    page.click("#do-ask")
    answer = page.locator("#answer")
    expect(answer.locator(".answer-text")).to_contain_text("beagle")
    assert "ask=1" in page.url
    cited = page.locator("li.hit.cited")
    expect(cited.first).to_be_visible()
    # each fact the answer cites is marked among the ranked facts, and quoted beside it
    quoted = answer.locator("ol.citations li").all_inner_texts()
    for text in cited.locator(".fact-text").all_inner_texts():
        assert text in quoted
    expect(page.locator("#hits")).to_be_visible()

    page.click("#do-search")  # the same question as a search: no answer
    expect(page.locator("#answer")).to_have_count(0)
    expect(page.locator("li.hit").first).to_be_visible()


def test_the_facts_tab_filters_by_words(stack: Stack, seeded: Seeded, page: Page) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/facts")
    every = len(facts(stack, seeded.key))
    expect(page.locator("#view nav.pager").first).to_contain_text(f"of {every}")
    page.fill("#facts-text", "priya LIVES")
    page.click("form.filter button")
    rows = page.locator("ol.facts li.fact")
    expect(rows.first).to_contain_text("Priya lives")
    for text in rows.locator(".fact-text").all_inner_texts():
        assert "priya" in text.lower() and "lives" in text.lower()
    # the fact s5 changed keeps its earlier text one click away
    changed = page.locator("li.fact", has_text="Aurora")
    expect(changed.locator("details.earlier del")).to_contain_text("Denver")
    page.fill("#facts-text", "zeppelin")
    page.click("form.filter button")
    expect(page.locator("#view")).to_contain_text('No fact holds "zeppelin".')


def test_markup_in_memory_renders_as_text(stack: Stack, seeded: Seeded, page: Page) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/timeline")
    stated = page.locator('[data-session-id="s5"] .produced .fact-text')
    expect(stated).to_have_text(XSS)
    view(page, stack, "profiles")
    expect(page.locator("article.profile h3", has_text="Tom pasted")).to_have_text(XSS)
    view(page, stack, "search?q=What+did+Tom+paste+into+the+chat%3F")
    expect(page.locator("li.hit .fact-text", has_text="Tom pasted").first).to_have_text(XSS)
    (pasted,) = [f for f in facts(stack, seeded.key) if f["text"] == XSS]
    view(page, stack, f"erase?fact={pasted['id']}")
    expect(page.locator(".target .fact-text")).to_have_text(XSS)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert page.locator("body script").count() == 0


def test_another_tenant_sees_none_of_the_space(stack: Stack, seeded: Seeded, page: Page) -> None:
    sign_in(page, stack.url, seeded.other_key)
    expect(page.locator("#spaces")).to_contain_text("No spaces for this key.")
    expect(page.locator("#jobs")).to_contain_text("No jobs known")
    view(page, stack, "timeline")
    error = page.locator("#view .error")
    expect(error).to_contain_text("404")
    expect(error).to_contain_text(f"space '{SPACE}' does not exist")
    for route in ("events", "profiles", "search?q=Where+does+Priya+live%3F"):
        view(page, stack, route)
        expect(page.locator("#view .error")).to_contain_text("does not exist")
    assert "Priya" not in page.locator("body").inner_text()


@pytest.mark.parametrize("name", ["..", "."])
def test_a_crafted_link_cannot_reach_another_route(
    stack: Stack, seeded: Seeded, page: Page, name: str
) -> None:
    """`sessions/..` would resolve to the space itself (and the router's redirect would carry
    a DELETE there): the page refuses the name before anything is sent."""
    before = httpx.get(
        f"{stack.url}/v1/spaces/{SPACE}",
        headers={"Authorization": f"Bearer {seeded.key}"},
        timeout=60,
    ).json()
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/erase?session={name}")
    expect(page.locator("#view .error")).to_contain_text("cannot be a name or id")
    expect(page.locator("#erase-start")).to_have_count(0)
    after = httpx.get(
        f"{stack.url}/v1/spaces/{SPACE}",
        headers={"Authorization": f"Bearer {seeded.key}"},
        timeout=60,
    ).json()
    assert after["counts"] == before["counts"]


def test_erasing_a_fact_asks_first_and_shows_the_receipt(
    stack: Stack, seeded: Seeded, page: Page
) -> None:
    (beagle,) = [f for f in facts(stack, seeded.key) if "beagle puppy" in f["text"]]
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/timeline")
    page.locator(f'li.fact[data-fact-id="{beagle["id"]}"] a.erase-link').click()
    expect(page.locator(".target .fact-text")).to_have_text(beagle["text"])
    confirm = page.locator("#confirm")
    expect(confirm).to_be_hidden()
    page.click("#erase-start")
    expect(confirm).to_be_visible()
    page.click("#erase-cancel")  # nothing happens without the confirm step
    expect(confirm).to_be_hidden()
    assert any(f["id"] == beagle["id"] for f in facts(stack, seeded.key))

    page.click("#erase-start")
    page.click("#erase-confirm")
    receipt = page.locator("#receipt")
    deleted = receipt.locator('tr[data-key="facts_deleted"]')
    expect(deleted.locator("td.n")).to_have_text("1")
    expect(deleted.locator(".ids")).to_have_text(beagle["id"])
    expect(receipt.locator('tr[data-key="sessions_deleted"] td.n')).to_have_text("0")
    assert all(f["id"] != beagle["id"] for f in facts(stack, seeded.key))

    page.reload()  # the fact is gone: the view says so
    expect(page.locator("#view .error")).to_contain_text("404")


def test_erasing_a_session_shows_the_receipt(stack: Stack, seeded: Seeded, page: Page) -> None:
    sign_in(page, stack.url, seeded.key, then=f"#/spaces/{SPACE}/timeline")
    page.locator('[data-session-id="s4"] a.erase-link', has_text="erase session").click()
    expect(page.locator(".target")).to_contain_text("4 turns")
    page.click("#erase-start")
    page.click("#erase-confirm")
    receipt = page.locator("#receipt")
    expect(receipt.locator('tr[data-key="sessions_deleted"] .ids')).to_have_text("s4")
    # s4's six facts: "Yes, I joined Clay Collective in Denver yesterday." is one of them
    expect(receipt.locator('tr[data-key="facts_deleted"] td.n')).to_have_text("6")
    page.click("text=Back to the timeline")
    expect(page.locator("article.session")).to_have_count(4)


def test_a_missing_worker_shows_the_504_message(stack: Stack, page: Page) -> None:
    with api_without_workers(stack.env, NO_WORKER_REDIS, stack.data / "api-no-worker.log") as url:
        sign_in(page, url, tenant_key(url, "lonely"))
        error = page.locator("#spaces .error")
        expect(error).to_contain_text("no worker answered in time; check that workers run")
        expect(error).to_contain_text("504")
        expect(page.locator("#jobs")).to_contain_text("No jobs known")
