// A space's sessions in order, and what each did to memory: the facts it produced with their
// source turns, the facts it repeated (duplicates dropped), and the facts it updated.

import { all, get, seg, space } from "./api.js";
import { badge, chip, empty, h, href, pager, plural, when } from "./dom.js";

const PAGE = 10; // sessions a page
const SHOWN = 8; // items of a block shown at once; the rest one click away

/** What each session did, from the facts' provenance and history. */
export function bySession(facts) {
  const produced = new Map();
  const updated = new Map();
  const repeated = new Map();
  const push = (map, key, value) => (map.get(key) ?? map.set(key, []).get(key)).push(value);
  for (const fact of facts) {
    push(produced, fact.source.session_id, fact);
    const updaters = new Set();
    fact.history.forEach((rev, i) => {
      if (rev.correction) return; // a caller's correction, not a session's update
      const next = fact.history[i + 1];
      const from = fact.also_from.find((p) => p.session_id === rev.replaced_by_session);
      push(updated, rev.replaced_by_session, {
        fact,
        old: rev.text,
        new: next ? next.text : fact.text,
        turnIds: from ? from.turn_ids : [],
      });
      updaters.add(rev.replaced_by_session);
    });
    for (const p of fact.also_from) {
      // An update also adds its session to the fact's provenance: that is not a repeat.
      if (!updaters.has(p.session_id)) push(repeated, p.session_id, { fact, turnIds: p.turn_ids });
    }
  }
  return { produced, updated, repeated };
}

function turnQuotes(turnIds, turns) {
  return h(
    "ul",
    { class: "turns-quoted" },
    turnIds.map((id) => {
      const turn = turns.get(id);
      return h(
        "li",
        {},
        h("code", { class: "turn-id" }, id),
        turn
          ? [h("b", {}, ` ${turn.speaker}: `), h("q", {}, turn.text || turn.image_caption || "")]
          : h("span", { class: "muted" }, " (turn not stored)"),
      );
    }),
  );
}

function eraseLink(name, kind, id, label) {
  return h(
    "a",
    { class: "erase-link", href: href(["spaces", name, "erase"], { [kind]: id }) },
    label,
  );
}

function producedFact(name, fact, turns) {
  const first = fact.history.length ? fact.history[0].text : fact.text;
  const by = fact.history.map((r) => r.replaced_by_session ?? "a correction");
  return h(
    "li",
    { class: "fact", dataset: { factId: fact.id } },
    h(
      "div",
      { class: "fact-line" },
      h("span", { class: "fact-text" }, first),
      h(
        "span",
        { class: "fact-actions" },
        chip(fact.id.slice(0, 8), "id"),
        eraseLink(name, "fact", fact.id, "erase…"),
      ),
    ),
    fact.history.length
      ? h(
          "div",
          { class: "later" },
          `updated later by ${by.join(", ")}; now reads: `,
          h("span", { class: "fact-now" }, fact.text),
        )
      : null,
    // its source turns, one click away: a turn stating three facts is quoted once per fact
    h(
      "details",
      { class: "source" },
      h("summary", { class: "muted small" }, `said in ${fact.source.turn_ids.join(", ")}`),
      turnQuotes(fact.source.turn_ids, turns),
    ),
  );
}

function updatedFact(entry, turns) {
  return h(
    "li",
    { class: "update", dataset: { factId: entry.fact.id } },
    h("div", { class: "old" }, h("span", { class: "label" }, "was"), h("del", {}, entry.old)),
    h("div", { class: "new" }, h("span", { class: "label" }, "now"), h("ins", {}, entry.new)),
    h("div", { class: "muted small" }, `first stated in ${entry.fact.source.session_id}`),
    entry.turnIds.length ? turnQuotes(entry.turnIds, turns) : null,
  );
}

function repeatedFact(entry, turns) {
  return h(
    "li",
    { class: "duplicate", dataset: { factId: entry.fact.id } },
    h("div", { class: "fact-text" }, entry.fact.text),
    h("div", { class: "muted small" }, `already kept from ${entry.fact.source.session_id}`),
    turnQuotes(entry.turnIds, turns),
  );
}

function block(title, count, cls, items, note) {
  const rest = items.slice(SHOWN);
  return h(
    "div",
    { class: `block ${cls}` },
    h("h3", {}, title, " ", h("span", { class: "count" }, count)),
    note ? h("p", { class: "muted small" }, note) : null,
    items.length ? h("ul", { class: "facts" }, items.slice(0, SHOWN)) : null,
    rest.length
      ? h(
          "details",
          { class: "more" },
          h("summary", {}, `${rest.length} more`),
          h("ul", { class: "facts" }, rest),
        )
      : null,
  );
}

function sessionCard(name, n, session, detail, did, job) {
  const turns = new Map((detail.turns || []).map((t) => [t.id, t]));
  const id = session.session_id;
  const produced = did.produced.get(id) ?? [];
  const updated = did.updated.get(id) ?? [];
  const repeated = did.repeated.get(id) ?? [];
  const turnCount = session.turn_count ?? detail.turn_count ?? turns.size;
  // The job's counts while the job is known (jobs expire), else what the commit recorded.
  const dropped = job ? job.counts.duplicates_dropped : undefined;
  const recorded = session.stats ? session.stats.duplicates_dropped : undefined;
  const dupNote =
    dropped !== undefined
      ? `Its job counted ${plural(dropped, "duplicate")} dropped.`
      : recorded !== undefined
        ? `Its commit counted ${plural(recorded, "duplicate")} dropped (the job has expired).`
        : null;
  return h(
    "article",
    { class: "card session", id: `session-${id}`, dataset: { sessionId: id } },
    h(
      "header",
      { class: "session-head" },
      h("span", { class: "seq" }, `#${n}`),
      h("h2", {}, h("code", {}, id)),
      h(
        "span",
        { class: "muted" },
        `${when(session.started_at)} · ${session.participants.join(", ")} · ${plural(turnCount, "turn")}`,
      ),
      session.status
        ? h("span", { class: "muted small" }, "session ", badge(session.status))
        : null,
      job ? h("span", { class: "muted small" }, "job ", badge(job.state)) : null,
      h("span", { class: "grow" }),
      eraseLink(name, "session", id, "erase session…"),
    ),
    h(
      "div",
      { class: "session-body" },
      block(
        "Facts produced",
        produced.length,
        "produced",
        produced.map((f) => producedFact(name, f, turns)),
      ),
      h(
        "div",
        { class: "side" },
        block(
          "Facts updated",
          updated.length,
          "updated",
          updated.map((e) => updatedFact(e, turns)),
        ),
        block(
          "Duplicates dropped",
          repeated.length,
          "repeated",
          repeated.map((e) => repeatedFact(e, turns)),
          dupNote,
        ),
      ),
    ),
    h(
      "details",
      { class: "all-turns" },
      h("summary", {}, `All ${plural(turns.size, "turn")}`),
      h(
        "ol",
        {},
        [...turns.values()].map((t) =>
          h(
            "li",
            {},
            h("code", { class: "turn-id" }, t.id),
            h("b", {}, ` ${t.speaker}: `),
            t.text,
            t.image_caption ? h("em", {}, ` [photo: ${t.image_caption}]`) : null,
          ),
        ),
      ),
    ),
  );
}

export async function timeline({ space: name, query }) {
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const page = await get(`${space(name, "sessions")}?limit=${PAGE}&offset=${offset}`);
  if (page.total === 0) return empty("No sessions in this space yet.");
  const ids = page.items.map((s) => s.session_id);
  const [details, facts, jobs] = await Promise.all([
    Promise.all(ids.map((id) => get(space(name, "sessions", id)))),
    // only the facts these sessions produced, updated or repeated
    ids.length ? all(space(name, "facts"), { session_id: ids }) : [],
    // Jobs only add counts (and expire): one that cannot be read leaves the card whole.
    Promise.all(
      page.items.map((s) =>
        s.job_id ? get(`v1/jobs/${seg(s.job_id)}`).catch(() => null) : null,
      ),
    ),
  ]);
  const did = bySession(facts);
  const link = (at) => href(["spaces", name, "timeline"], { offset: at });
  const nav = () => pager(offset, page.items.length, page.total, PAGE, link, "sessions");
  return h(
    "div",
    { class: "timeline" },
    nav(),
    page.items.map((s, i) =>
      sessionCard(
        name,
        offset + i + 1,
        s,
        details[i],
        did,
        jobs[i],
      ),
    ),
    page.total > PAGE ? nav() : null,
  );
}
