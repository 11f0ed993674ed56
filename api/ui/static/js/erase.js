// Erasure of one fact or one session's contribution: what will go, a confirm step, then the
// receipt the API returns (every id it deleted or rewrote).

import { get, request, space } from "./api.js";
import { empty, errorBox, h, href, plural, when } from "./dom.js";

const RECEIPT = [
  ["facts_deleted", "facts deleted"],
  ["facts_rewritten", "facts rewritten"],
  ["events_deleted", "events deleted"],
  ["events_rewritten", "events rewritten"],
  ["profiles_deleted", "profiles deleted"],
  ["profiles_rewritten", "profiles rewritten"],
  ["sessions_deleted", "sessions deleted"],
];

export function receipt(erased) {
  return h(
    "section",
    { class: "card receipt", id: "receipt" },
    h("h2", {}, "Erasure receipt"),
    h(
      "table",
      { class: "grid" },
      h(
        "tbody",
        {},
        RECEIPT.map(([key, label]) => {
          const ids = erased[key] ?? [];
          return h(
            "tr",
            { class: ids.length ? "some" : "none", dataset: { key } },
            h("th", {}, label),
            h("td", { class: "n" }, ids.length),
            h(
              "td",
              {},
              h(
                "div",
                { class: "ids" },
                ids.map((id) => h("code", {}, id)),
              ),
            ),
          );
        }),
      ),
    ),
  );
}

async function describe(name, kind, id) {
  if (kind === "fact") {
    const fact = await get(space(name, "facts", id));
    return h(
      "div",
      { class: "target" },
      h("div", { class: "fact-text" }, fact.text),
      h(
        "p",
        { class: "muted small" },
        `from ${fact.source.session_id} (turns ${fact.source.turn_ids.join(", ")})` +
          (fact.also_from.length
            ? `, also ${fact.also_from.map((p) => p.session_id).join(", ")}`
            : "") +
          ` · in ${plural(fact.event_ids.length, "event")} · ${plural(fact.history.length, "earlier version")}`,
      ),
      h(
        "p",
        {},
        "Erasing it deletes the fact, re-summarises the events it was in (an event left " +
          "empty is deleted) and rebuilds or drops every profile version that cites it.",
      ),
    );
  }
  const session = await get(space(name, "sessions", id));
  const count =
    session.turn_count ?? (Array.isArray(session.turns) ? session.turns.length : session.turns);
  return h(
    "div",
    { class: "target" },
    h(
      "div",
      { class: "fact-text" },
      h("code", {}, id),
      ` · ${when(session.started_at)} · ${plural(count, "turn")} · ${session.participants.join(", ")}`,
    ),
    h(
      "p",
      {},
      "Erasing it deletes its raw record and job, the facts only it supports and its " +
        "provenance on other facts; facts it updated get back their earlier text, and what " +
        "was built from them is rebuilt.",
    ),
  );
}

export async function erase({ space: name, query }) {
  const kind = query.has("session") ? "session" : query.has("fact") ? "fact" : null;
  const id = kind ? query.get(kind) : "";
  const pick = h(
    "form",
    { class: "card inline-form erase-pick" },
    h("label", { for: "erase-kind" }, "Erase a"),
    h(
      "select",
      { id: "erase-kind", name: "kind" },
      h("option", { value: "fact" }, "fact"),
      h("option", { value: "session" }, "session"),
    ),
    h("label", { for: "erase-id" }, "with id"),
    h("input", { id: "erase-id", name: "id", value: id, size: 40, autocomplete: "off" }),
    h("button", { type: "submit", class: "secondary" }, "Show"),
  );
  pick.elements.kind.value = kind ?? "fact";
  pick.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = pick.elements.id.value.trim();
    if (value)
      location.hash = href(["spaces", name, "erase"], { [pick.elements.kind.value]: value });
  });
  if (!kind || !id) {
    return h(
      "div",
      { class: "erase" },
      pick,
      empty("Pick a fact or a session, here or from the timeline's “erase…” links."),
    );
  }
  let what;
  try {
    what = await describe(name, kind, id);
  } catch (err) {
    return h("div", { class: "erase" }, pick, errorBox(err));
  }
  const outcome = h("div", { class: "outcome" });
  const start = h(
    "button",
    { type: "button", class: "danger", id: "erase-start" },
    `Erase this ${kind}…`,
  );
  const confirmBox = h(
    "div",
    { class: "confirm", id: "confirm", hidden: true },
    h("p", {}, h("strong", {}, `Erase ${kind} ${id}? `), "This cannot be undone."),
    h("button", { type: "button", class: "danger", id: "erase-confirm" }, "Yes, erase it"),
    " ",
    h("button", { type: "button", class: "secondary", id: "erase-cancel" }, "Cancel"),
  );
  start.addEventListener("click", () => {
    start.hidden = true;
    confirmBox.hidden = false;
  });
  confirmBox.querySelector("#erase-cancel").addEventListener("click", () => {
    confirmBox.hidden = true;
    start.hidden = false;
  });
  confirmBox.querySelector("#erase-confirm").addEventListener("click", async (event) => {
    event.target.disabled = true;
    outcome.replaceChildren(h("p", { class: "muted" }, "Erasing…"));
    try {
      const reply = await request(
        "DELETE",
        space(name, kind === "fact" ? "facts" : "sessions", id),
      );
      confirmBox.hidden = true;
      what.classList.add("erased");
      outcome.replaceChildren(
        receipt(reply.erased),
        h("p", {}, h("a", { href: href(["spaces", name, "timeline"]) }, "Back to the timeline")),
      );
    } catch (err) {
      event.target.disabled = false;
      outcome.replaceChildren(errorBox(err));
    }
  });
  return h(
    "div",
    { class: "erase" },
    pick,
    h(
      "section",
      { class: "card" },
      h("h2", {}, kind === "fact" ? "Fact" : "Session"),
      what,
      start,
      confirmBox,
    ),
    outcome,
  );
}
