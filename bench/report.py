"""Turn LoCoMo benchmark result files into a markdown report and a recall bar chart."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from common.errors import InvalidInput

CATEGORIES: list[tuple[str, str]] = [
    ("single_hop", "Single-hop"),
    ("multi_hop", "Multi-hop"),
    ("temporal", "Temporal"),
    ("open_domain", "Open-domain"),
    ("overall", "Overall"),
]

PAPER_TABLE2: dict[str, dict[str, float]] = {
    "paper AtomMem (full)": {
        "single_hop": 76.30,
        "multi_hop": 48.15,
        "temporal": 81.10,
        "open_domain": 48.98,
    },
    "paper FLAT": {
        "single_hop": 72.18,
        "multi_hop": 41.75,
        "temporal": 79.89,
        "open_domain": 42.46,
    },
}

DASH = "—"
SOURCE_KEY = "_source"
LATENCY_STAGES = ("total", "lexical", "graph")


def load_results(paths: list[Path]) -> list[dict[str, Any]]:
    """Read result files; each must be a JSON object with `summary` and `variant`."""
    results: list[dict[str, Any]] = []
    for path in paths:
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InvalidInput(f"{path}: cannot read result file ({exc})") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise InvalidInput(f"{path}: expected a JSON object, got {type(doc).__name__}")
        missing = [key for key in ("summary", "variant") if key not in doc]
        if missing:
            raise InvalidInput(f"{path}: missing {', '.join(missing)}")
        if not isinstance(doc["summary"], dict):
            raise InvalidInput(f"{path}: `summary` must be an object")
        doc[SOURCE_KEY] = str(path)
        results.append(doc)
    return results


def _labels(results: list[dict[str, Any]]) -> list[str]:
    """Variant names, with the file stem added where two results share a variant."""
    counts = Counter(str(r.get("variant", "?")) for r in results)
    labels = []
    for i, result in enumerate(results):
        variant = str(result.get("variant", "?"))
        if counts[variant] > 1:
            source = result.get(SOURCE_KEY)
            suffix = Path(source).stem if source else f"#{i + 1}"
            variant = f"{variant} ({suffix})"
        labels.append(variant)
    return labels


def _k_text(results: list[dict[str, Any]]) -> str:
    ks = sorted({int(r["k"]) for r in results if r.get("k") is not None})
    return "/".join(str(k) for k in ks) if ks else "k"


def _recall(result: dict[str, Any], category: str) -> float | None:
    entry = result.get("summary", {}).get(category)
    if isinstance(entry, dict) and entry.get("recall") is not None:
        return float(entry["recall"])
    return None


def _fmt(value: Any) -> str:
    return DASH if value is None else f"{float(value):.2f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(
    results: list[dict[str, Any]], folds: dict[str, list[str]] | None = None
) -> str:
    """Render recall, latency, ingest and command sections as markdown; with `folds` (a name
    for each set of conversations), also the recall of every variant on each fold."""
    k = _k_text(results)
    labels = _labels(results)
    headers = ["Variant", *(name for _, name in CATEGORIES), "Questions"]
    lines = [
        f"# LoCoMo Recall@{k} by category",
        "",
        _row(headers),
        _row(["---"] + ["---:"] * (len(headers) - 1)),
    ]
    for label, result in zip(labels, results, strict=True):
        overall = result.get("summary", {}).get("overall")
        questions = overall.get("questions") if isinstance(overall, dict) else None
        cells = [_fmt(_recall(result, cat)) for cat, _ in CATEGORIES]
        lines.append(_row([_cell(label), *cells, DASH if questions is None else str(questions)]))
    for name, row in PAPER_TABLE2.items():
        cells = [_fmt(row.get(cat)) for cat, _ in CATEGORIES]
        lines.append(_row([f"*{name}*", *cells, DASH]))
    lines += ["", "Paper rows are the reference Recall@10 values (Table 2).", ""]
    lines += _folds(labels, results, folds or {})

    lat_headers = ["Variant"] + [f"{s} {q}" for s in LATENCY_STAGES for q in ("p50", "p95")]
    lines += [
        "## Latency (ms)",
        "",
        _row(lat_headers),
        _row(["---"] + ["---:"] * (len(lat_headers) - 1)),
    ]
    for label, result in zip(labels, results, strict=True):
        latency = result.get("latency_ms") or {}
        cells = []
        for stage in LATENCY_STAGES:
            stats = latency.get(stage) if isinstance(latency, dict) else None
            for q in ("p50", "p95"):
                cells.append(_fmt(stats.get(q) if isinstance(stats, dict) else None))
        lines.append(_row([_cell(label), *cells]))

    lines += ["", "## Ingest", ""]
    lines += [_row(["Variant", "Facts", "Facts/s"]), _row(["---", "---:", "---:"])]
    for label, result in zip(labels, results, strict=True):
        ingest = result.get("ingest") or {}
        facts = ingest.get("facts") if isinstance(ingest, dict) else None
        rate = ingest.get("facts_per_s") if isinstance(ingest, dict) else None
        lines.append(_row([_cell(label), DASH if facts is None else str(facts), _fmt(rate)]))

    lines += _answers(labels, results) + _llm(labels, results)
    lines += ["", "## Commands", ""]
    by_command: dict[str, list[str]] = {}
    for label, result in zip(labels, results, strict=True):
        by_command.setdefault(str(result.get("command") or DASH), []).append(label)
    for command, names in by_command.items():
        lines += [f"{', '.join(names)}:", "", "```", command, "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def _folds(
    labels: list[str], results: list[dict[str, Any]], folds: dict[str, list[str]]
) -> list[str]:
    """Recall per category on each fold, from the per-question rows of the result files, and
    F1 where the run answered."""
    from bench.locomo import summarize

    lines: list[str] = []
    headers = ["Variant", *(name for _, name in CATEGORIES), "Questions"]
    for name, conversations in folds.items():
        lines += [f"## Fold {name}: {', '.join(conversations)}", ""]
        lines += [_row(headers), _row(["---"] + ["---:"] * (len(headers) - 1))]
        for label, result in zip(labels, results, strict=True):
            rows = [q for q in result.get("questions", []) if q["conversation"] in conversations]
            if not rows:
                raise InvalidInput(f"{result[SOURCE_KEY]}: no question of fold {name}")
            summary = summarize(rows)
            cells = [_fmt(summary[cat]["recall"]) for cat, _ in CATEGORIES]
            lines.append(_row([_cell(label), *cells, str(len(rows))]))
            if summary["overall"].get("f1") is not None:  # the run answered: its F1 too
                f1 = [_fmt(summary[cat].get("f1")) for cat, _ in CATEGORIES]
                lines.append(_row([_cell(f"{label} (F1)"), *f1, str(len(rows))]))
        lines.append("")
    return lines


def _answers(labels: list[str], results: list[dict[str, Any]]) -> list[str]:
    """F1, BLEU-1 and J per category, for the results that answered."""
    answered = [
        (label, r)
        for label, r in zip(labels, results, strict=True)
        if (r.get("summary", {}).get("overall") or {}).get("f1") is not None
    ]
    if not answered:
        return []
    headers = ["Variant", "Metric", *(name for _, name in CATEGORIES)]
    lines = ["", "## Answers (%)", "", _row(headers), _row(["---", "---"] + ["---:"] * 5)]
    for label, result in answered:
        summary = result["summary"]
        for metric, name in (("f1", "F1"), ("bleu1", "BLEU-1"), ("judge", "J")):
            cells = [_fmt((summary.get(cat) or {}).get(metric)) for cat, _ in CATEGORIES]
            if any(c != DASH for c in cells):
                lines.append(_row([_cell(label), name, *cells]))
    return lines


def _llm(labels: list[str], results: list[dict[str, Any]]) -> list[str]:
    """Model calls and tokens per ingested turn and per question, when a model was used."""
    lines: list[str] = []
    for label, result in zip(labels, results, strict=True):
        for title, block, per in (
            ("ingest, per turn", (result.get("ingest") or {}).get("llm"), "per_turn"),
            ("queries, per question", result.get("llm_per_question"), "per_question"),
        ):
            if not block:
                continue
            if not lines:
                lines = ["", "## LLM calls and tokens", ""]
                lines += [
                    _row(["Variant", "Where", "Calls", "Skipped", "Prompt tok", "Completion tok"]),
                    _row(["---", "---", "---:", "---:", "---:", "---:"]),
                ]
            each = block[per]
            lines.append(
                _row(
                    [
                        _cell(label),
                        title,
                        *(
                            _fmt(each.get(key))
                            for key in ("calls", "skipped", "prompt_tokens", "completion_tokens")
                        ),
                    ]
                )
            )
    return lines


def plot_recall(results: list[dict[str, Any]], path: Path) -> None:
    """Save a grouped bar chart of recall per category, with the paper rows hatched in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: list[tuple[str, list[float | None], bool]] = [
        (label, [_recall(r, cat) for cat, _ in CATEGORIES], False)
        for label, r in zip(_labels(results), results, strict=True)
    ]
    series += [
        (name, [row.get(cat) for cat, _ in CATEGORIES], True) for name, row in PAPER_TABLE2.items()
    ]
    n = len(series)
    width = 0.8 / max(n, 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 1.6 * len(CATEGORIES) + 0.3 * n), 4.8))
    try:
        greys = ["0.55", "0.8"]
        paper_i = 0
        for i, (label, values, is_paper) in enumerate(series):
            xs = [j + (i - (n - 1) / 2) * width for j, v in enumerate(values) if v is not None]
            ys = [v for v in values if v is not None]
            if is_paper:
                style: dict[str, Any] = {
                    "color": greys[paper_i % len(greys)],
                    "hatch": "//",
                    "edgecolor": "0.3",
                }
                paper_i += 1
            else:
                style = {}
            ax.bar(xs, ys, width, label=label, **style)
        ax.set_xticks(range(len(CATEGORIES)))
        ax.set_xticklabels([name.lower() for _, name in CATEGORIES])
        ax.set_ylabel(f"Recall@{_k_text(results)} (%)")
        ax.set_ylim(0, 100)
        ax.set_title("LoCoMo recall by category")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        fig.savefig(Path(path), format="png", dpi=120)
    finally:
        plt.close(fig)


def write_report(
    paths: list[Path], out_dir: Path, folds: dict[str, list[str]] | None = None
) -> tuple[Path, Path]:
    """Write report.md and recall_by_category.png into out_dir and return their paths."""
    results = load_results(paths)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / "report.md"
    png_path = out_dir / "recall_by_category.png"
    md_path.write_text(render_markdown(results, folds), encoding="utf-8")
    plot_recall(results, png_path)
    return md_path, png_path
