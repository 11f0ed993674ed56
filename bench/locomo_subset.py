"""Cut a LoCoMo conversation down to its first N sessions and the questions answered there.

    python -m bench.locomo_subset --name conv-26 --sessions 2 --questions 10 --out /tmp/sub

Writes OUT/conv/NAME.json (the first N sessions, and at most Q questions of categories 1-4
whose evidence lies entirely in them, in file order) and OUT/facts/NAME.json (the
pre-extracted facts of those sessions), for runs where a whole conversation costs too much:
a small local model answering every LLM stage on a CPU.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"


def session_number(key: str) -> int | None:
    match = re.fullmatch(r"session_(\d+)(?:_date_time)?", key)
    return int(match.group(1)) if match else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", required=True, help="e.g. conv-26")
    parser.add_argument("--sessions", type=int, required=True)
    parser.add_argument("--questions", type=int, required=True)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    source = json.loads((args.data / "conversations" / f"{args.name}.json").read_text())
    conversation = {
        key: value
        for key, value in source["conversation"].items()
        if (n := session_number(key)) is None or n <= args.sessions
    }

    def inside(evidence: list[str]) -> bool:
        found = [re.match(r"D(\d+):", e) for e in evidence]
        return all(m is not None and int(m.group(1)) <= args.sessions for m in found)

    qa = [
        q
        for q in source["qa"]
        if q.get("category") in (1, 2, 3, 4) and q.get("evidence") and inside(q["evidence"])
    ][: args.questions]
    facts = json.loads((args.data / "atommem_facts" / f"{args.name}.json").read_text())
    facts["results"] = [r for r in facts["results"] if r["session_number"] <= args.sessions]
    for folder, doc in (("conv", {"qa": qa, "conversation": conversation}), ("facts", facts)):
        (args.out / folder).mkdir(parents=True, exist_ok=True)
        (args.out / folder / f"{args.name}.json").write_text(json.dumps(doc))
    turns = sum(len(v) for k, v in conversation.items() if re.fullmatch(r"session_\d+", k))
    print(f"{args.name}: {turns} turns, {len(qa)} questions, {len(facts['results'])} fact rows")


if __name__ == "__main__":
    main()
