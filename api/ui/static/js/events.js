// A space's events: each one's summary, its member facts and its time span.

import { all, space } from "./api.js";
import { chip, empty, h, plural } from "./dom.js";

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
    h(
      "ul",
      { class: "members" },
      event.fact_ids.map((id) => {
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
    ),
  );
}

export async function events({ space: name }) {
  const [items, facts] = await Promise.all([all(space(name, "events")), all(space(name, "facts"))]);
  if (items.length === 0) return empty("No events in this space.");
  const byId = new Map(facts.map((f) => [f.id, f]));
  // Dated events in time order, then the undated.
  const key = (e) => (e.time_span ? e.time_span.start : "9999");
  items.sort((a, b) => key(a).localeCompare(key(b)) || a.summary.localeCompare(b.summary));
  return h(
    "div",
    { class: "events" },
    items.map((e) => eventCard(e, byId)),
  );
}
