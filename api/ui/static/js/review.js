// The review of the Fact Executor's teacher samples (#/review, #/review/INDEX): one sample at
// a time, its dialogue and the teacher's facts, each fact accepted, edited, dropped or split
// (the paper's verify, refine, filter, decompose), from the keyboard. Saving logs the
// reviewer's decision and opens the next unreviewed sample.

import { ApiError, get, request, withQuery } from "./api.js";
import { empty, h, href, plural, when } from "./dom.js";

const REVIEWER = "atommem.reviewer";
const KEYS = [
  ["j / k", "next / previous fact"],
  ["a", "accept"],
  ["e", "edit"],
  ["d", "drop"],
  ["s", "split (one fact a line)"],
  ["x", "exclude the sample"],
  ["Ctrl+Enter", "save, next"],
  ["n / p", "next / previous sample"],
];
const SENTENCE = /(?<=[.!?;])\s+|,\s+and\s+|\s+and\s+/;

function counts(summary) {
  const a = summary.actions;
  return (
    `${summary.reviewed} of ${plural(summary.samples, "sample")} reviewed · ` +
    `${summary.excluded} excluded · accept ${a.accept} · edit ${a.edit} · drop ${a.drop} · ` +
    `split ${a.split} · ${plural(summary.decisions, "decision")} logged`
  );
}

function turnLine(turn, target) {
  return h(
    "li",
    { class: target ? "turn target" : "turn" },
    h("strong", {}, `${turn.speaker}: `),
    turn.text,
  );
}

// One teacher fact's row: its state is the action and the textarea's text.
function factRow(original, previous, index) {
  let action = previous ? previous.action : "accept";
  const text = h("textarea", {
    class: "fact-text",
    rows: 1,
    spellcheck: "true",
    "aria-label": `fact ${index + 1}`,
  });
  text.value = previous ? previous.texts.join("\n") : original;
  const label = h("span", { class: "action-label" });
  const buttons = ["accept", "edit", "drop", "split"].map((name) =>
    h("button", { type: "button", class: `act act-${name}`, dataset: { action: name } }, name),
  );
  const row = h(
    "li",
    { class: "review-fact", tabindex: "-1", dataset: { index: String(index) } },
    h("p", { class: "muted original" }, `teacher: ${original}`),
    text,
    h("div", { class: "actions" }, label, buttons),
  );
  const show = () => {
    row.dataset.action = action;
    label.textContent = action;
    text.disabled = action === "drop";
    text.rows = Math.max(1, text.value.split("\n").length);
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.action === action));
  };
  const set = (name) => {
    action = name;
    if (name === "accept") text.value = original;
    if (name === "split" && text.value.split("\n").length < 2) {
      const parts = original.split(SENTENCE).filter((p) => p.trim());
      text.value = (parts.length > 1 ? parts : [original, original]).join("\n");
    }
    show();
    if (name === "edit" || name === "split") text.focus();
    else row.focus();
  };
  text.addEventListener("input", () => {
    if (action === "accept" && text.value !== original) action = "edit";
    show();
  });
  for (const b of buttons) b.addEventListener("click", () => set(b.dataset.action));
  show();
  return {
    row,
    set,
    decision() {
      const lines = text.value
        .split("\n")
        .map((l) => l.trim())
        .filter(Boolean);
      if (action === "drop") return { action, texts: [] };
      if (action === "split") return { action: lines.length > 1 ? "split" : "edit", texts: lines };
      const one = lines.join(" ");
      return { action: one === original.trim() ? "accept" : "edit", texts: [one] };
    },
  };
}

async function load(index) {
  if (index === null) {
    const page = await get(withQuery("v1/executor/samples", { state: "unreviewed", limit: 1 }));
    if (page.items.length) return page;
    return get(withQuery("v1/executor/samples", { limit: 1 })).then((p) => ({ ...p, done: true }));
  }
  return get(withQuery("v1/executor/samples", { offset: index, limit: 1 }));
}

export async function review({ index }) {
  const page = await load(index);
  const summary = h("p", { class: "muted review-counts" }, counts(page.summary));
  if (!page.items.length) {
    return h(
      "div",
      { class: "review" },
      h("h1", {}, "Review"),
      summary,
      empty("No teacher samples for this key: run `atommem executor teach` first."),
    );
  }
  const sample = page.items[0];
  const reviewer = h("input", {
    id: "reviewer",
    name: "reviewer",
    autocomplete: "name",
    placeholder: "your name",
    required: true,
  });
  reviewer.value = localStorage.getItem(REVIEWER) ?? "";
  const previous = sample.decision;
  const rows = sample.facts.map((f, i) => factRow(f, previous?.facts[i], i));
  const exclude = h("input", { id: "exclude", type: "checkbox" });
  exclude.checked = Boolean(previous?.excluded);
  const status = h("p", { class: "review-status", role: "status" });
  const save = h("button", { type: "submit", class: "save" }, "Save and next");
  const go = (i) => {
    if (i >= 0 && i < page.summary.samples) location.hash = href(["review", String(i)]);
  };
  async function submit() {
    const name = reviewer.value.trim();
    if (!name) {
      status.textContent = "Enter your name as the reviewer first.";
      reviewer.focus();
      return;
    }
    localStorage.setItem(REVIEWER, name);
    const body = { reviewer: name, excluded: exclude.checked, facts: rows.map((r) => r.decision()) };
    save.disabled = true;
    try {
      await request("POST", `v1/executor/samples/${encodeURIComponent(sample.id)}/decisions`, {
        body,
      });
    } catch (err) {
      save.disabled = false;
      status.textContent = err instanceof ApiError ? err.message : String(err);
      return;
    }
    if (location.hash === "#/review") window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = "#/review";
  }
  const form = h(
    "form",
    { class: "review-form", novalidate: true },
    h("ol", { class: "review-facts" }, rows.map((r) => r.row)),
    sample.facts.length ? null : empty("The teacher found nothing to keep in this turn."),
    h("label", { class: "exclude" }, exclude, " exclude the whole sample (x)"),
    h("div", { class: "review-save" }, h("label", { for: "reviewer" }, "Reviewer"), reviewer, save),
    status,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  const root = h(
    "div",
    { class: "review", dataset: { sample: sample.id } },
    h("h1", {}, `Review · sample ${sample.index + 1} of ${page.summary.samples}`),
    summary,
    page.done ? h("p", { class: "review-done" }, "Every sample is reviewed.") : null,
    h(
      "p",
      { class: "muted" },
      `${sample.conversation} · session ${sample.session_id} · ${when(sample.started_at)} · ` +
        `teacher ${sample.provenance.teacher_model}` +
        (previous ? ` · last decided by ${previous.reviewer}` : " · not reviewed yet"),
    ),
    h(
      "ol",
      { class: "dialogue" },
      sample.context.map((t) => turnLine(t, false)),
      sample.turns.map((t) => turnLine(t, true)),
    ),
    form,
    h(
      "dl",
      { class: "keys" },
      KEYS.map(([k, what]) => [h("dt", {}, h("kbd", {}, k)), h("dd", {}, what)]),
    ),
  );
  let current = 0;
  const focus = (i) => {
    if (!rows.length) return;
    current = Math.max(0, Math.min(rows.length - 1, i));
    rows[current].row.focus();
  };
  const onKey = (event) => {
    if (!root.isConnected) {
      document.removeEventListener("keydown", onKey);
      return;
    }
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      submit();
      return;
    }
    const typing = ["TEXTAREA", "INPUT"].includes(event.target.tagName);
    if (event.key === "Escape" && typing) {
      event.target.blur();
      focus(current);
      return;
    }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    const inRow = event.target.closest?.(".review-fact");
    if (inRow) current = Number(inRow.dataset.index);
    const act = { a: "accept", e: "edit", d: "drop", s: "split" }[event.key];
    if (act && rows.length) {
      event.preventDefault();
      rows[current].set(act);
    } else if (event.key === "j" || event.key === "ArrowDown") {
      event.preventDefault();
      focus(current + 1);
    } else if (event.key === "k" || event.key === "ArrowUp") {
      event.preventDefault();
      focus(current - 1);
    } else if (event.key === "x") {
      exclude.checked = !exclude.checked;
    } else if (event.key === "n") {
      go(sample.index + 1);
    } else if (event.key === "p") {
      go(sample.index - 1);
    }
  };
  document.addEventListener("keydown", onKey);
  requestAnimationFrame(() => focus(0));
  return root;
}
