// Profiles per person: every version of each trait on one time axis with its validity interval
// and evidence, and "what did we believe about X on day D?" answered by highlighting the
// version valid on D.

import { all, space } from "./api.js";
import { chip, empty, h, href, s } from "./dom.js";

const DAY_MS = 86_400_000;
const W = 1000;

const day = (iso) => Date.parse(`${iso}T00:00:00Z`) / DAY_MS;
const iso = (d) => new Date(d * DAY_MS).toISOString().slice(0, 10);

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
  const versions = versionsOf(profile);
  return h(
    "article",
    {
      class: date && !valid ? "card profile unknown" : "card profile",
      dataset: { profileId: profile.id },
    },
    h("h3", {}, profile.content),
    strip(profile, scale, date, valid),
    h(
      "ol",
      { class: "versions" },
      versions.map((v, i) => versionItem(v, i, facts, valid, date)),
    ),
  );
}

function answer(byPerson, date) {
  const rows = [];
  for (const [person, list] of byPerson) {
    for (const p of list) {
      const v = versionAt(p, date);
      if (v)
        rows.push(
          h(
            "li",
            {},
            h("b", {}, person),
            ": ",
            v.content,
            h("span", { class: "muted small" }, ` (${v.t_from} → ${v.current ? "open" : v.t_to})`),
          ),
        );
    }
  }
  return h(
    "div",
    { class: "card answer", id: "believed" },
    h("h2", {}, `What we believed on ${date}`),
    rows.length ? h("ul", {}, rows) : empty("Nothing was known yet on that day."),
  );
}

export async function profiles({ space: name, query }) {
  const [items, factList] = await Promise.all([
    all(space(name, "profiles")),
    all(space(name, "facts")),
  ]);
  if (items.length === 0) return empty("No profiles in this space.");
  const facts = new Map(factList.map((f) => [f.id, f]));
  const persons = [...new Set(items.map((p) => p.person))].sort();
  const root = h("div", { class: "profiles" });
  const person = h(
    "select",
    { id: "person", name: "person" },
    h("option", { value: "" }, "everyone"),
    persons.map((p) => h("option", { value: p }, p)),
  );
  const date = h("input", { id: "date", name: "date", type: "date" });
  person.value = persons.includes(query.get("person")) ? query.get("person") : "";
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
  const body = h("div", { class: "profile-body" });

  function draw() {
    const when = date.value || "";
    const chosen = items.filter((p) => !person.value || p.person === person.value);
    const byPerson = new Map();
    for (const p of chosen)
      (byPerson.get(p.person) ?? byPerson.set(p.person, []).get(p.person)).push(p);
    const scale = scaleFor(items, when);
    const earliest = (p) => versionsOf(p)[0].t_from;
    const sections = [...byPerson].map(([who, list]) =>
      h(
        "section",
        { class: "person", dataset: { person: who } },
        h("h2", {}, who, " ", h("span", { class: "count" }, list.length)),
        h("div", { class: "axis-wrap" }, axis(scale, when)),
        list
          .sort((a, b) => earliest(a).localeCompare(earliest(b)))
          .map((p) => profileCard(p, facts, scale, when)),
      ),
    );
    body.replaceChildren(...(when ? [answer(byPerson, when)] : []), ...sections);
    history.replaceState(
      null,
      "",
      href(["spaces", name, "profiles"], { person: person.value, date: when }),
    );
  }
  person.addEventListener("change", draw);
  date.addEventListener("change", draw);
  date.addEventListener("input", draw);
  controls.addEventListener("submit", (e) => e.preventDefault());
  controls.querySelector("#clear-date").addEventListener("click", () => {
    date.value = "";
    draw();
  });
  draw();
  root.append(controls, body);
  return root;
}
