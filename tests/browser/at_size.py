"""The inspector on a space of 10,000 facts, in headless Chromium: how long each view takes to
load, how tall it is, and how many API requests it makes, beside the same views of a
300-fact space served by the same process (the floor the ratios are read against), at 1280
and 390 px: `python -m tests.browser.at_size [--facts 10000] [--out FILE]` (default
bench/results/inspector_at_size.json)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.helpers.browser import launch, missing_browser, sign_in
from tests.helpers.ui_at_size import NARROW, WIDE, build, measure, served
from workers.launch import ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/inspector_at_size.json")
    args = parser.parse_args(argv)
    reason = missing_browser()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="atommem-ui-size-") as tmp:
        built = build(Path(tmp) / "data", args.facts)
        with served(built) as running, sync_playwright() as playwright:
            browser = launch(playwright)
            doc: dict[str, Any] = {
                "benchmark": "inspector_at_size",
                "command": "python -m tests.browser.at_size " + " ".join(argv or sys.argv[1:]),
                "facts": built.facts,
                "build_seconds": round(built.seconds, 1),
                "repeats": args.repeats,
            }
            for width in (WIDE, NARROW):
                context = browser.new_context(viewport={"width": width, "height": 900})
                page = context.new_page()
                sign_in(page, running.url, running.key())
                doc[f"views_{width}px"] = measure(page, running.url, args.repeats)
                context.close()
            browser.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
