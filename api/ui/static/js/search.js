// The search playground: a question (with k and mode) sent to the space's search route with
// `explain`, and the reply laid out: ranked facts with each stage's score, stage timings,
// the profiles and events used, and the recall graph.

import { request, space } from "./api.js";
import { chip, empty, errorBox, h, href, num, s } from "./dom.js";
import { span } from "./events.js";
import { recallGraph } from "./graph.js";

const MODES = ["full", "flat", "no-graph", "no-profile"];
const STAGES = ["primary", "compensatory", "fact_sh", "graph", "relevance"];

function bar(value, max) {
  const w = Math.max(0, Math.min(1, max > 0 ? value / max : 0)) * 60;
  return s(
    "svg",
    { class: "bar", viewBox: "0 0 60 8", width: 60, height: 8 },
    s("rect", { x: 0, y: 0, width: 60, height: 8, class: "bar-bg" }),
    s("rect", { x: 0, y: 0, width: w.toFixed(1), height: 8, class: "bar-fg" }),
  );
}

function stageList(stages) {
  const names = [
    ...STAGES.filter((k) => k in stages),
    ...Object.keys(stages)
      .filter((k) => !STAGES.includes(k))
      .sort(),
  ];
  return h(
    "dl",
    { class: "stages" },
    names.map((k) =>
      h(
        "div",
        { class: `stage stage-${k}` },
        h("dt", {}, k),
        h("dd", {}, bar(stages[k], 1), " ", num(stages[k])),
      ),
    ),
  );
}

function hitsList(hits, onHover, cited) {
  if (hits.length === 0) return empty("Nothing recalled.");
  return h(
    "ol",
    { class: "hits" },
    hits.map((hit, i) => {
      const li = h(
        "li",
        { class: cited.has(hit.fact_id) ? "hit cited" : "hit", dataset: { factId: hit.fact_id } },
        h("span", { class: "rank-badge" }, String(i + 1)),
        h(
          "div",
          { class: "hit-body" },
          h("div", { class: "fact-text" }, hit.text),
          cited.has(hit.fact_id) ? chip("cited by the answer", "cited-chip") : null,
          h(
            "div",
            { class: "muted small" },
            `score ${num(hit.score, 4)} · ${hit.session_id} · turns ${hit.turn_ids.join(", ")}`,
          ),
          stageList(hit.stages),
        ),
      );
      li.addEventListener("mouseenter", () => onHover(hit.fact_id));
      return li;
    }),
  );
}

function timings(ms) {
  const entries = Object.entries(ms);
  if (entries.length === 0) return empty("No timings.");
  const max = Math.max(...entries.map(([, v]) => v));
  return h(
    "table",
    { class: "grid timings" },
    h(
      "tbody",
      {},
      entries.map(([k, v]) =>
        h(
          "tr",
          {},
          h("th", {}, k),
          h("td", { class: "n" }, `${v.toFixed(2)} ms`),
          h("td", {}, bar(v, max)),
        ),
      ),
    ),
  );
}

function intentLine(intent) {
  return h(
    "div",
    { class: "intent chips" },
    h("span", { class: "muted small" }, "intent:"),
    chip(intent.style),
    intent.needs_profile ? chip("needs profiles") : null,
    intent.participants.map((p) => chip(p, "person")),
    intent.keywords.map((k) => chip(k)),
    intent.time_range ? chip(span(intent.time_range), "time") : null,
  );
}

/** What an answer cites, in words: the facts among the hits, the profile in force, the
 * pending turns. */
function citation(id, reply) {
  if (id.startsWith("profile:")) {
    const p = reply.profiles.find((x) => x.profile_id === id.slice("profile:".length));
    return p ? `${p.person}: ${p.content} (since ${p.valid_from})` : id;
  }
  if (id.startsWith("pending:")) {
    const t = reply.pending.find((x) => id === `pending:${x.session_id}:${x.turn_id}`);
    return t ? `${t.speaker}: ${t.text} (not yet processed)` : id;
  }
  const hit = reply.hits.find((x) => x.fact_id === id);
  return hit ? hit.text : id;
}

function answerCard(reply) {
  return h(
    "section",
    { class: "card answer", id: "answer" },
    h("h2", {}, "Answer"),
    h("p", { class: "answer-text" }, reply.answer),
    reply.answer_fact_ids.length
      ? h(
          "ol",
          { class: "citations" },
          reply.answer_fact_ids.map((id) => h("li", { dataset: { cites: id } }, citation(id, reply))),
        )
      : empty("It cites nothing: memory held no evidence for it."),
  );
}

function results(reply) {
  const list = h("div", { class: "hits-wrap" });
  let graph = null;
  const mark = (id) => {
    for (const li of list.querySelectorAll("li.hit"))
      li.classList.toggle("selected", li.dataset.factId === id);
  };
  const cited = new Set(reply.answer_fact_ids ?? []);
  list.append(hitsList(reply.hits, (id) => graph && graph.select(id), cited));
  if (reply.graph) graph = recallGraph(reply.graph, mark);
  return h(
    "div",
    { class: "results" },
    intentLine(reply.intent),
    h(
      "div",
      { class: "result-grid" },
      h(
        "div",
        { class: "evidence-column" },
        "answer" in reply ? answerCard(reply) : null,
        h(
          "section",
          { class: "card", id: "hits" },
          h("h2", {}, `Ranked facts (${reply.hits.length})`),
          list,
        ),
      ),
      h(
        "section",
        { class: "card", id: "graph" },
        h("h2", {}, "Recall graph"),
        graph
          ? graph.element
          : empty("No graph: the mode skips the graph stage, or the API did not explain."),
      ),
    ),
    h(
      "div",
      { class: "result-grid three" },
      h(
        "section",
        { class: "card", id: "timings" },
        h("h2", {}, "Stage timings"),
        timings(reply.timings_ms),
      ),
      h(
        "section",
        { class: "card", id: "profiles-used" },
        h("h2", {}, `Profiles used (${reply.profiles.length})`),
        reply.profiles.length
          ? h(
              "ul",
              { class: "plain" },
              reply.profiles.map((p) =>
                h(
                  "li",
                  {},
                  h("b", {}, p.person),
                  ": ",
                  p.content,
                  h("span", { class: "muted small" }, ` since ${p.valid_from}`),
                ),
              ),
            )
          : empty("None."),
      ),
      h(
        "section",
        { class: "card", id: "events-used" },
        h("h2", {}, `Events used (${reply.events.length})`),
        reply.events.length
          ? h(
              "ul",
              { class: "plain" },
              reply.events.map((e) =>
                h(
                  "li",
                  {},
                  e.summary,
                  h("span", { class: "muted small" }, ` (score ${num(e.score)})`),
                ),
              ),
            )
          : empty("None."),
      ),
    ),
  );
}

export async function search({ space: name, query }) {
  const question = query.get("q") || "";
  const k = query.get("k") || "";
  const mode = MODES.includes(query.get("mode")) ? query.get("mode") : "full";
  const q = h("input", {
    id: "question",
    name: "q",
    value: question,
    placeholder: "Ask the memory, e.g. Where does Priya live?",
    required: true,
    autocomplete: "off",
  });
  const kIn = h("input", {
    id: "k",
    name: "k",
    type: "number",
    min: 1,
    max: 100,
    value: k,
    placeholder: "default",
  });
  const modeIn = h(
    "select",
    { id: "mode", name: "mode" },
    MODES.map((m) => h("option", { value: m }, m)),
  );
  modeIn.value = mode;
  const form = h(
    "form",
    { class: "card search-form" },
    h("label", { for: "question", class: "wide" }, "Question", q),
    h("label", { for: "k" }, "k", kIn),
    h("label", { for: "mode" }, "mode", modeIn),
    h(
      "div",
      { class: "buttons" },
      h("button", { type: "submit", id: "do-search", value: "search" }, "Search"),
      h("button", { type: "submit", id: "do-ask", value: "ask", class: "secondary" }, "Ask"),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = href(["spaces", name, "search"], {
      q: q.value.trim(),
      k: kIn.value,
      mode: modeIn.value,
      // Ask: the same recall, with the answer written from it beside its evidence
      ask: event.submitter && event.submitter.value === "ask" ? 1 : null,
    });
  });
  const out = h("div", { class: "search-out" });
  if (question.trim()) {
    const body = { question, explain: true, mode };
    if (k) body.k = Number.parseInt(k, 10);
    const route = query.get("ask") === "1" ? "ask" : "search";
    try {
      out.append(results(await request("POST", space(name, route), { body })));
    } catch (err) {
      out.append(errorBox(err));
    }
  }
  return h("div", { class: "search" }, form, out);
}
