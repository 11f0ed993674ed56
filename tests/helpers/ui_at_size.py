"""The inspector at size, as `test_inspector_at_size` and `python -m tests.browser.at_size`
drive it: two spaces built through the CLI (`atommem ingest` of generated sessions of
pre-extracted facts, as `bench scale` makes them; `big` of 10,000 facts and `small` of 300,
the floor its figures are read against), served by `atommem serve`, and each view loaded
afresh and timed in Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.metrics import percentiles
from bench.scale import synthetic_sessions
from tests.helpers.serve import Served, serving
from workers.launch import ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

BIG, SMALL = "big", "small"
SMALL_FACTS = 300
WIDE, NARROW = 1280, 390
# Each view, with what shows once it has loaded: its cards (or its empty note) drawn.
VIEWS = {
    "timeline": "article.session",
    "facts": "ol.facts li.fact",
    "events": "article.event",
    "profiles": "article.profile",
    "search?q=Where+has+Ava+been+with+a+cousin%3F": "li.hit",
    "search?q=Where+has+Ava+been+with+a+cousin%3F&ask=1": "#answer",
}


@dataclass
class Built:
    data: Path
    facts: dict[str, int]  # per space
    seconds: float


def _cli(data: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATOMMEM_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "cli", "-q", "--data-dir", str(data), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def build(data: Path, facts: int, seed: int = 7) -> Built:
    """Space `big` of `facts` generated facts and space `small` of 300, through the CLI."""
    began = time.perf_counter()
    sizes = {BIG: facts, SMALL: SMALL_FACTS}
    for space, size in sizes.items():
        folder = data.parent / f"{data.name}-{space}-sessions"
        folder.mkdir(parents=True, exist_ok=True)
        for session in synthetic_sessions(size, seed):
            (folder / f"{session.session_id}.json").write_text(session.model_dump_json())
        _cli(data, "ingest", str(folder), "--space", space, "--create-space")
    return Built(data=data, facts=sizes, seconds=time.perf_counter() - began)


def load(page: Page, url: str, space: str, route: str, ready: str) -> dict[str, Any]:
    """Open the view afresh (a full page load, not a hash change) and time it until its
    content shows; with the page's height and the API requests it made."""
    requests: list[str] = []
    listen = lambda r: requests.append(r.url) if "/v1/" in r.url else None  # noqa: E731
    page.goto("about:blank")
    page.on("request", listen)
    began = time.perf_counter()
    page.goto(f"{url}/ui/#/spaces/{space}/{route}")
    # The view replaces "Loading…" once all it reads has come: its first card marks the end.
    page.locator(f"#view {ready}").first.wait_for(state="attached", timeout=120_000)
    seconds = time.perf_counter() - began
    page.remove_listener("request", listen)
    return {
        "load_ms": round(seconds * 1000, 1),
        "height_px": int(page.evaluate("document.documentElement.scrollHeight")),
        "overflow_px": int(
            page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
        ),
        "api_requests": len(requests),
    }


def measure(page: Page, url: str, repeats: int = 3) -> dict[str, Any]:
    """Each view of both spaces, `repeats` times; the median load and the rest of the last."""
    out: dict[str, Any] = {}
    for space in (BIG, SMALL):
        for route, ready in VIEWS.items():
            runs = [load(page, url, space, route, ready) for _ in range(repeats)]
            row = runs[-1] | {"load_ms": percentiles([r["load_ms"] for r in runs])["p50"]}
            out.setdefault(route.split("?")[0] + ("+ask" if "ask=1" in route else ""), {})[
                space
            ] = row
    for row in out.values():
        row["ratio_to_small"] = round(row[BIG]["load_ms"] / row[SMALL]["load_ms"], 2)
    return out


@contextmanager
def served(built: Built) -> Iterator[Served]:
    with serving(built.data) as running:
        yield running
