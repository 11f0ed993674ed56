// A space's facts a page at a time, in session order, narrowed by words of their text on the
// server: each with where it was said, its earlier texts, and a way to erase it.

import { get, space, withQuery } from "./api.js";
import { chip, empty, filterForm, h, href, pager, plural } from "./dom.js";

const PAGE = 50;

/** Who replaced an earlier text: a session's update, or a caller's correction. */
function replacedBy(rev) {
  if (!rev.correction) return `replaced by ${rev.replaced_by_session}`;
  const { at, reason } = rev.correction;
  return `corrected ${String(at).slice(0, 10)}${reason ? `: ${reason}` : ""}`;
}

function factRow(name, fact) {
  const sessions = fact.also_from.map((p) => p.session_id);
  return h(
    "li",
    { class: "fact", dataset: { factId: fact.id } },
    h(
      "div",
      { class: "fact-line" },
      h("span", { class: "fact-text" }, fact.text),
      h(
        "span",
        { class: "fact-actions" },
        chip(fact.id.slice(0, 8), "id"),
        h(
          "a",
          { class: "erase-link", href: href(["spaces", name, "erase"], { fact: fact.id }) },
          "erase…",
        ),
      ),
    ),
    h(
      "div",
      { class: "muted small" },
      `${fact.source.session_id} · turns ${fact.source.turn_ids.join(", ")}`,
      sessions.length ? ` · also from ${sessions.join(", ")}` : "",
    ),
    fact.history.length
      ? h(
          "details",
          { class: "earlier" },
          h("summary", {}, plural(fact.history.length, "earlier text")),
          h(
            "ol",
            {},
            fact.history.map((rev) =>
              h(
                "li",
                {},
                h("del", {}, rev.text),
                h("span", { class: "muted small" }, ` (${replacedBy(rev)})`),
              ),
            ),
          ),
        )
      : null,
  );
}

export async function facts({ space: name, query }) {
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const text = (query.get("text") || "").trim();
  const page = await get(withQuery(space(name, "facts"), { text, limit: PAGE, offset }));
  const link = (at) => href(["spaces", name, "facts"], { text, offset: at });
  return h(
    "div",
    { class: "fact-list" },
    filterForm("facts-text", "Facts holding", text, (value) => {
      location.hash = href(["spaces", name, "facts"], { text: value });
    }),
    page.total === 0
      ? empty(text ? `No fact holds "${text}".` : "No facts in this space yet.")
      : [
          pager(offset, page.items.length, page.total, PAGE, link, "facts"),
          h(
            "ol",
            { class: "card facts", start: offset + 1 },
            page.items.map((f) => factRow(name, f)),
          ),
          page.total > PAGE ? pager(offset, page.items.length, page.total, PAGE, link, "facts") : null,
        ],
  );
}
