// Profiles per person: every version of each trait on one time axis with its validity interval
// and evidence, and "what did we believe about X on day D?" answered by highlighting the
// version valid on D.

import { factsById, get, space, withQuery } from "./api.js";
import { chip, empty, errorBox, filterForm, h, href, pager, s } from "./dom.js";

const DAY_MS = 86_400_000;
const W = 1000;
const PAGE = 20; // profiles a page
const SHOWN_VERSIONS = 4; // the newest versions of a profile shown at once
const ANSWER_LIMIT = 100; // profiles in force listed for a day

const day = (iso) => Date.parse(`${iso}T00:00:00Z`) / DAY_MS;

/** The version valid on `date` (YYYY-MM-DD): the current one from t_from on, else the
 * earlier version with t_from ≤ date < t_to (Profile.version_at). */
export function versionAt(profile, date) {
  if (date >= profile.t_from) return currentOf(profile);
  return versionsOf(profile).find((v) => !v.current && v.t_from <= date && date < v.t_to) ?? null;
}

/** Whether two version records are the same version of one profile. */
const same = (a, b) =>
  a !== null &&
  b !== null &&
  a.current === b.current &&
  a.t_from === b.t_from &&
  a.content === b.content;

function currentOf(profile) {
  return {
    content: profile.content,
    evidence_fact_ids: profile.evidence_fact_ids,
    t_from: profile.t_from,
    t_to: null,
    current: true,
  };
}

/** Earlier versions, then the current one, oldest first. */
function versionsOf(profile) {
  const earlier = profile.history.map((v) => ({ ...v, current: false }));
  earlier.sort((a, b) => a.t_from.localeCompare(b.t_from));
  return [...earlier, currentOf(profile)];
}

function scaleFor(profiles, date) {
  const days = profiles.flatMap((p) => [
    day(p.t_from),
    ...p.history.flatMap((v) => [day(v.t_from), day(v.t_to)]),
  ]);
  if (date) days.push(day(date));
  let lo = Math.min(...days);
  let hi = Math.max(...days);
  const pad = Math.max(15, (hi - lo) * 0.08);
  lo -= pad;
  hi += pad * 2; // room for the open end of current versions
  return { lo, hi, x: (d) => ((d - lo) / (hi - lo)) * W };
}

function ticks(scale) {
  const out = [];
  const start = new Date(scale.lo * DAY_MS);
  const months = (scale.hi - scale.lo) / 30.4;
  const step = months > 72 ? 12 : Math.max(1, Math.ceil(months / 12));
  let y = start.getUTCFullYear();
  let m = step === 12 ? 0 : start.getUTCMonth() + 1;
  for (;;) {
    if (m > 11) {
      y += Math.floor(m / 12);
      m %= 12;
    }
    const d = Date.UTC(y, m, 1) / DAY_MS;
    if (d > scale.hi) return out;
    if (d >= scale.lo)
      out.push({ d, label: step === 12 ? String(y) : `${y}-${String(m + 1).padStart(2, "0")}` });
    m += step;
  }
}

function axis(scale, date) {
  const marker = date ? Math.min(W - 40, Math.max(40, scale.x(day(date)))) : null;
  return s(
    "svg",
    { class: "axis", viewBox: `0 0 ${W} 34`, role: "img", "aria-label": "time axis" },
    s("line", { x1: 0, x2: W, y1: 33, y2: 33, class: "axis-line" }),
    ticks(scale)
      .filter((t) => scale.x(t.d) < W - 50)
      .map((t) => [
        s("line", { x1: scale.x(t.d), x2: scale.x(t.d), y1: 26, y2: 33, class: "tick" }),
        s("text", { x: scale.x(t.d) + 3, y: 30, class: "tick-label" }, t.label),
      ]),
    date
      ? s("text", { x: marker, y: 11, class: "marker-label", "text-anchor": "middle" }, date)
      : null,
    date
      ? s("line", {
          x1: scale.x(day(date)),
          x2: scale.x(day(date)),
          y1: 14,
          y2: 34,
          class: "marker",
        })
      : null,
  );
}

function strip(profile, scale, date, valid) {
  const versions = versionsOf(profile);
  return s(
    "svg",
    { class: "strip", viewBox: `0 0 ${W} 26`, role: "img", "aria-label": "versions over time" },
    versions.map((v, i) => {
      const x1 = scale.x(day(v.t_from));
      const x2 = v.current ? W : scale.x(day(v.t_to));
      const cls = [
        "version",
        v.current ? "current" : "earlier",
        same(v, valid) ? "valid" : "",
      ].join(" ");
      return s(
        "g",
        { class: cls },
        s("rect", { x: x1, y: 4, width: Math.max(2, x2 - x1 - 1), height: 18, rx: 3 }),
        v.current
          ? s("path", { d: `M ${W - 10} 7 L ${W - 2} 13 L ${W - 10} 19 Z`, class: "open-end" })
          : null,
        x2 - x1 > 40 ? s("text", { x: x1 + 5, y: 17, class: "vlabel" }, `v${i + 1}`) : null,
        s("title", {}, `${v.t_from} → ${v.current ? "open" : v.t_to}: ${v.content}`),
      );
    }),
    date
      ? s("line", {
          x1: scale.x(day(date)),
          x2: scale.x(day(date)),
          y1: 0,
          y2: 26,
          class: "marker",
        })
      : null,
  );
}

function versionItem(v, i, facts, valid, date) {
  const isValid = same(v, valid);
  return h(
    "li",
    {
      class: isValid ? "version-item valid" : "version-item",
      dataset: { current: v.current ? "yes" : "no" },
    },
    h(
      "div",
      { class: "interval" },
      h("b", {}, `v${i + 1}`),
      ` ${v.t_from} → ${v.current ? "open" : v.t_to}`,
      v.current ? h("div", {}, "current") : null,
      isValid ? h("div", {}, chip(`valid on ${date}`, "valid-chip")) : null,
    ),
    h("div", { class: "content" }, v.content),
    h(
      "ul",
      { class: "evidence" },
      v.evidence_fact_ids.map((id) => {
        const fact = facts.get(id);
        return h(
          "li",
          {},
          fact ? fact.text : h("code", {}, id),
          fact
            ? h("span", { class: "muted small" }, ` (${fact.source.session_id})`)
            : h("span", { class: "muted small" }, " (fact no longer stored)"),
        );
      }),
    ),
  );
}

function profileCard(profile, facts, scale, date) {
  const valid = date ? versionAt(profile, date) : null;
  const items = versionsOf(profile).map((v, i) => versionItem(v, i, facts, valid, date));
  // A long-lived trait keeps many versions: the newest show, the earlier fold away (open
  // when the version valid on the day asked about is among them).
  const folded = items.slice(0, Math.max(0, items.length - SHOWN_VERSIONS));
  const shown = items.slice(folded.length);
  return h(
    "article",
    {
      class: date && !valid ? "card profile unknown" : "card profile",
      dataset: { profileId: profile.id },
    },
    h("h3", {}, profile.content),
    strip(profile, scale, date, valid),
    folded.length
      ? h(
          "details",
          { class: "earlier-versions", open: folded.some((li) => li.matches(".valid")) },
          h("summary", {}, `${folded.length} earlier versions`),
          h("ol", { class: "versions" }, folded),
        )
      : null,
    h("ol", { class: "versions", start: folded.length + 1 }, shown),
  );
}

function answer(found, date) {
  return h(
    "div",
    { class: "card answer", id: "believed" },
    h("h2", {}, `What we believed on ${date}`),
    found.total
      ? h(
          "ul",
          {},
          found.items.map((p) =>
            h(
              "li",
              {},
              h("b", {}, p.person),
              ": ",
              p.content,
              h("span", { class: "muted small" }, ` (since ${p.t_from})`),
            ),
          ),
        )
      : empty("Nothing was known yet on that day."),
    found.total > found.items.length
      ? h("p", { class: "muted small" }, `and ${found.total - found.items.length} more`)
      : null,
  );
}

export async function profiles({ space: name, info, query }) {
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const text = (query.get("text") || "").trim();
  const who = query.get("person") || "";
  const listing = { person: who, text };
  // by person, then when each first held (the server's order)
  const page = await get(withQuery(space(name, "profiles"), { ...listing, limit: PAGE, offset }));
  const cited = page.items.flatMap((p) => versionsOf(p).flatMap((v) => v.evidence_fact_ids));
  const facts = await factsById(name, cited);

  const persons = [...new Set([...info.participants, ...(who ? [who] : [])])].sort();
  const person = h(
    "select",
    { id: "person", name: "person" },
    h("option", { value: "" }, "everyone"),
    persons.map((p) => h("option", { value: p }, p)),
  );
  person.value = who;
  const date = h("input", { id: "date", name: "date", type: "date" });
  date.value = /^\d{4}-\d{2}-\d{2}$/.test(query.get("date") || "") ? query.get("date") : "";
  const controls = h(
    "form",
    { class: "card controls inline-form" },
    h("label", { for: "person" }, "What did we believe about"),
    person,
    h("label", { for: "date" }, "on"),
    date,
    h("button", { type: "button", class: "secondary", id: "clear-date" }, "clear"),
  );
  const link = (at, changes = {}) =>
    href(["spaces", name, "profiles"], {
      person: person.value,
      date: date.value,
      text,
      offset: at,
      ...changes,
    });
  const believed = h("div", { class: "believed-slot" });
  const body = h("div", { class: "profile-body" });
  let asked = 0;

  async function believe(when) {
    const mine = ++asked;
    if (!when) {
      believed.replaceChildren();
      return;
    }
    const params = { ...listing, as_of: when, limit: ANSWER_LIMIT };
    let node;
    try {
      node = answer(await get(withQuery(space(name, "profiles"), params)), when);
    } catch (err) {
      node = errorBox(err);
    }
    if (mine === asked) believed.replaceChildren(node);
  }

  function draw() {
    const when = date.value || "";
    const byPerson = new Map();
    for (const p of page.items)
      (byPerson.get(p.person) ?? byPerson.set(p.person, []).get(p.person)).push(p);
    const scale = page.items.length ? scaleFor(page.items, when) : null;
    const earliest = (p) => versionsOf(p)[0].t_from;
    body.replaceChildren(
      ...[...byPerson].map(([person, list]) =>
        h(
          "section",
          { class: "person", dataset: { person } },
          h("h2", {}, person, " ", h("span", { class: "count" }, list.length)),
          h("div", { class: "axis-wrap" }, axis(scale, when)),
          list
            .sort((a, b) => earliest(a).localeCompare(earliest(b)))
            .map((p) => profileCard(p, facts, scale, when)),
        ),
      ),
    );
    history.replaceState(null, "", link(offset));
    believe(when);
  }
  person.addEventListener("change", () => {
    location.hash = link(0);
  });
  date.addEventListener("change", draw);
  date.addEventListener("input", draw);
  controls.addEventListener("submit", (e) => e.preventDefault());
  controls.querySelector("#clear-date").addEventListener("click", () => {
    date.value = "";
    draw();
  });
  draw();
  const filter = filterForm("profiles-text", "Profiles holding", text, (value) => {
    location.hash = link(0, { text: value });
  });
  const nav = () => pager(offset, page.items.length, page.total, PAGE, link, "profiles");
  return h(
    "div",
    { class: "profiles" },
    controls,
    filter,
    believed,
    page.total === 0
      ? empty(text || who ? "No profiles match." : "No profiles in this space.")
      : [nav(), body, page.total > PAGE ? nav() : null],
  );
}
