"""Screenshots of every view of the web inspector, for the docs:
`python -m tests.browser.shoot [--out docs/ui]`.

It starts the same stack as the browser tests (on its own database of the Redis on 127.0.0.1:6379,
flushed), ingests the same five sessions, and drives Debian's Chromium (/usr/bin/chromium)
through each view."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from tests.helpers.browser import SPACE, launch, missing_browser, seed, sign_in
from tests.helpers.redis import shared_url
from tests.helpers.stack import running_stack
from workers.launch import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import FloatRect, Page

REDIS_URL = shared_url("tests.browser.shoot")  # run as __main__: named, not __name__
WIDTH = 1280


def shot(page: Page, path: Path, max_height: int = 1700) -> None:
    """The page from its top, at most `max_height` pixels of it."""
    height = int(page.evaluate("document.documentElement.scrollHeight"))
    clip: FloatRect = {"x": 0, "y": 0, "width": WIDTH, "height": min(height, max_height)}
    page.screenshot(path=str(path), full_page=True, clip=clip)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui")
    out: Path = parser.parse_args(argv).out.resolve()
    reason = missing_browser()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_stack(REDIS_URL, Path(tmp)) as stack,
        sync_playwright() as playwright,
    ):
        seeded = seed(stack)
        browser = launch(playwright)
        page = browser.new_page(viewport={"width": WIDTH, "height": 800})
        ui = f"{stack.url}/ui/"

        page.goto(ui)
        page.fill("#key", "amk_this-key-was-revoked")
        page.click("form.signin button[type=submit]")
        page.wait_for_selector("form.signin .error")
        shot(page, out / "sign-in-error.png", max_height=560)

        sign_in(page, stack.url, seeded.key)
        page.wait_for_selector("#jobs tbody tr")
        shot(page, out / "spaces.png")

        page.goto(f"{ui}#/spaces/{SPACE}/timeline?offset=2")  # s3 (updated later) to s5
        page.wait_for_selector('[data-session-id="s5"] .update')
        shot(page, out / "timeline.png", max_height=2000)

        page.goto(f"{ui}#/spaces/{SPACE}/facts?text=priya")
        page.wait_for_selector("ol.facts li.fact")
        shot(page, out / "facts.png", max_height=1100)

        page.goto(f"{ui}#/spaces/{SPACE}/events")
        page.wait_for_selector("article.event")
        shot(page, out / "events.png")

        page.goto(f"{ui}#/spaces/{SPACE}/profiles?person=Priya&date=2024-05-01")
        page.wait_for_selector("#believed")
        shot(page, out / "profiles.png", max_height=1500)

        page.goto(f"{ui}#/spaces/{SPACE}/search?q=Where+does+Priya+live%3F")
        page.wait_for_selector("svg.recall-graph")
        page.click('g.node[data-rank="1"]')
        shot(page, out / "search.png")

        page.goto(f"{ui}#/spaces/{SPACE}/search?q=What+did+Tom+adopt%3F&ask=1")
        page.wait_for_selector("#answer")
        shot(page, out / "ask.png", max_height=1100)

        facts = httpx.get(
            f"{stack.url}/v1/spaces/{SPACE}/facts",
            params={"limit": 1000},
            headers={"Authorization": f"Bearer {seeded.key}"},
        ).json()["items"]
        (beagle,) = [f for f in facts if "beagle puppy" in f["text"]]
        page.goto(f"{ui}#/spaces/{SPACE}/erase?fact={beagle['id']}")
        page.click("#erase-start")
        page.click("#erase-confirm")
        page.wait_for_selector("#receipt")
        shot(page, out / "erasure.png")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
