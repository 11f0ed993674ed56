"""`python -m bench.compare_recall A_DIR B_DIR`: two LoCoMo result directories side by side,
question by question: whether each retrieved top-k list (fact ids in rank order) is the same.

Fact ids are uuid5 of the space and the fact's source, so two runs over the same data give the
same ids to the same facts whatever the store. For every variant whose `locomo_<variant>.json`
is in both directories it counts identical lists, lists holding the same ids in another order,
and lists that differ, and shows the first few that differ with the positions that changed.
It reports and never judges: the exit status is 0 whatever it finds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

PATTERN = "locomo_*.json"


def _results(directory: Path) -> dict[str, Path]:
    """Variant name -> result file."""
    return {p.stem.removeprefix("locomo_"): p for p in sorted(directory.glob(PATTERN))}


def _lists(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Each question, keyed by (conversation, qa index), with its question and its ids."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {
        (str(row["conversation"]), int(row["index"])): {
            "question": row["question"],
            "ids": [str(hit["fact_id"]) for hit in row["retrieved"]],
            "texts": {str(hit["fact_id"]): hit["text"] for hit in row["retrieved"]},
            "recall": row.get("recall"),
        }
        for row in doc["questions"]
    }


def _changed_positions(a: list[str], b: list[str]) -> list[dict[str, Any]]:
    """Every rank where the two lists hold different ids (1-based, as a reader counts)."""
    out = []
    for rank in range(max(len(a), len(b))):
        left = a[rank] if rank < len(a) else None
        right = b[rank] if rank < len(b) else None
        if left != right:
            out.append({"rank": rank + 1, "a": left, "b": right})
    return out


def compare_variant(a: Path, b: Path, show: int) -> dict[str, Any]:
    """The counts for one variant, and the first `show` questions whose lists differ."""
    left, right = _lists(a), _lists(b)
    shared = [key for key in left if key in right]
    identical = reordered = differ = 0
    examples: list[dict[str, Any]] = []
    for key in shared:
        one, two = left[key], right[key]
        if one["ids"] == two["ids"]:
            identical += 1
            continue
        if sorted(one["ids"]) == sorted(two["ids"]):
            reordered += 1
            kind = "reordered"
        else:
            differ += 1
            kind = "different"
        if len(examples) < show:
            texts = {**one["texts"], **two["texts"]}
            examples.append(
                {
                    "conversation": key[0],
                    "index": key[1],
                    "question": one["question"],
                    "kind": kind,
                    "recall": {"a": one["recall"], "b": two["recall"]},
                    "only_in_a": [texts[i] for i in one["ids"] if i not in two["ids"]],
                    "only_in_b": [texts[i] for i in two["ids"] if i not in one["ids"]],
                    "changed": _changed_positions(one["ids"], two["ids"]),
                }
            )
    return {
        "a": str(a),
        "b": str(b),
        "questions_compared": len(shared),
        "only_in_a": len(left) - len(shared),
        "only_in_b": len(right) - len(shared),
        "identical": identical,
        "same_set_other_order": reordered,
        "different": differ,
        "examples": examples,
    }


def compare(a_dir: Path, b_dir: Path, show: int) -> dict[str, Any]:
    a, b = _results(a_dir), _results(b_dir)
    return {
        "a": str(a_dir),
        "b": str(b_dir),
        "variants": {v: compare_variant(a[v], b[v], show) for v in a if v in b},
        "only_in_a": sorted(set(a) - set(b)),
        "only_in_b": sorted(set(b) - set(a)),
    }


def _print(report: dict[str, Any]) -> None:
    print(f"A: {report['a']}\nB: {report['b']}")
    if not report["variants"]:
        print(f"no variant has a {PATTERN} in both directories")
    for variant, r in report["variants"].items():
        print(
            f"\n{variant}: {r['questions_compared']} questions compared, {r['identical']} "
            f"identical, {r['same_set_other_order']} same set in another order, "
            f"{r['different']} different"
        )
        if r["only_in_a"] or r["only_in_b"]:
            print(f"  questions in one file only: A {r['only_in_a']}, B {r['only_in_b']}")
        for ex in r["examples"]:
            ranks = ", ".join(str(c["rank"]) for c in ex["changed"])
            print(
                f"  {ex['conversation']}#{ex['index']} ({ex['kind']}, recall "
                f"{ex['recall']['a']} -> {ex['recall']['b']}): {ex['question']}"
            )
            print(f"    changed ranks: {ranks}")
            for text in ex["only_in_a"]:
                print(f"    - A only: {text}")
            for text in ex["only_in_b"]:
                print(f"    + B only: {text}")
    for side in ("only_in_a", "only_in_b"):
        if report[side]:
            print(f"\nvariants in {side[-1].upper()} only: {', '.join(report[side])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("a_dir", type=Path, help="a directory of locomo_<variant>.json files")
    parser.add_argument("b_dir", type=Path, help="another, compared with the first")
    parser.add_argument("--show", type=int, default=5, help="differing questions shown per variant")
    parser.add_argument("--out", type=Path, help="also write the comparison as JSON")
    args = parser.parse_args(argv)
    report = compare(args.a_dir, args.b_dir, args.show)
    _print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
