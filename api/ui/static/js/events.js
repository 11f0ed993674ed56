// A space's events: each one's summary, its member facts and its time span.

import { all, get, space, withQuery } from "./api.js";
import { chip, empty, filterForm, h, href, pager, plural } from "./dom.js";

const PAGE = 25; // events a page
const SHOWN = 6; // member facts shown at once

export function span(range) {
  if (!range) return "no date";
  return range.start === range.end ? range.start : `${range.start} → ${range.end}`;
}

function eventCard(event, facts) {
  return h(
    "article",
    { class: "card event", dataset: { eventId: event.id } },
    h(
      "header",
      { class: "event-head" },
      h("span", { class: "when" }, span(event.time_span)),
      h(
        "span",
        { class: "muted" },
        `${event.participants.join(", ")} · ${plural(event.fact_ids.length, "fact")}`,
      ),
    ),
    h("p", { class: "summary" }, event.summary),
    h(
      "div",
      { class: "chips" },
      event.keywords.map((k) => chip(k)),
    ),
    members(event.fact_ids.slice(0, SHOWN), facts),
    event.fact_ids.length > SHOWN
      ? h(
          "details",
          { class: "more" },
          h("summary", {}, `${event.fact_ids.length - SHOWN} more facts`),
          members(event.fact_ids.slice(SHOWN), facts),
        )
      : null,
  );
}

function members(ids, facts) {
  return h(
    "ul",
    { class: "members" },
    ids.map((id) => {
      const fact = facts.get(id);
      if (!fact) return h("li", { class: "muted" }, h("code", {}, id), " (not in the listing)");
      return h(
        "li",
        { class: "member" },
        h("span", { class: "fact-text" }, fact.text),
        " ",
        h(
          "span",
          { class: "muted small" },
          `${fact.source.session_id} · ${fact.source.turn_ids.join(", ")}`,
        ),
      );
    }),
  );
}

export async function events({ space: name, query }) {
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const text = (query.get("text") || "").trim();
  // the server's order: dated events by their first day, then the undated
  const page = await get(withQuery(space(name, "events"), { text, limit: PAGE, offset }));
  const ids = page.items.map((e) => e.id);
  const facts = ids.length ? await all(space(name, "facts"), { event_id: ids }) : [];
  const byId = new Map(facts.map((f) => [f.id, f]));
  const link = (at) => href(["spaces", name, "events"], { text, offset: at });
  return h(
    "div",
    { class: "events" },
    filterForm("events-text", "Events whose summary or keywords hold", text, (value) => {
      location.hash = href(["spaces", name, "events"], { text: value });
    }),
    page.total === 0
      ? empty(text ? `No events hold "${text}".` : "No events in this space.")
      : [
          pager(offset, page.items.length, page.total, PAGE, link, "events"),
          page.items.map((e) => eventCard(e, byId)),
        ],
  );
}
