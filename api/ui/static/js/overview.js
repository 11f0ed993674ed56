// The start page: the tenant's spaces with their counts, and its recent jobs (state, reason,
// counts), newest first.

import { get, withQuery } from "./api.js";
import { badge, empty, epoch, errorBox, h, href, section } from "./dom.js";

const JOBS_PAGE = 50;
const REFRESH_MS = 3000;
const STATES = ["queued", "extracting", "committing", "profiling", "done", "failed"];

// The counts a job table shows in columns; the rest are one click away.
const JOB_COUNTS = [
  ["facts_in", "in"],
  ["facts_stored", "stored"],
  ["duplicates_dropped", "dup."],
  ["updates", "upd."],
  ["events_created", "events"],
];

function spacesTable(reply) {
  if (reply.items.length === 0) return empty("No spaces for this key.");
  const head = ["space", "created", "participants", "sessions", "facts", "events", "profiles"];
  return h(
    "table",
    { class: "grid spaces" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        head.map((t, i) => h("th", { class: i > 2 ? "n" : null }, t)),
      ),
    ),
    h(
      "tbody",
      {},
      reply.items.map((sp) =>
        h(
          "tr",
          {},
          h("td", {}, h("a", { href: href(["spaces", sp.name, "timeline"]) }, sp.name)),
          h("td", {}, String(sp.created_at).slice(0, 16).replace("T", " ")),
          h("td", {}, sp.participants.join(", ")),
          ["sessions", "facts", "events", "profiles"].map((k) =>
            h("td", { class: "n" }, sp.counts[k]),
          ),
        ),
      ),
    ),
  );
}

export function jobsTable(jobs, { showSpace = true } = {}) {
  if (jobs.length === 0) return empty("No jobs known (finished jobs expire after a while).");
  const head = [
    "updated",
    showSpace ? "space" : null,
    "session",
    "state",
    "reason",
    ...JOB_COUNTS.map(([, label]) => label),
    "attempts",
    "counts",
  ].filter(Boolean);
  return h(
    "table",
    { class: "grid jobs" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        head.map((t) =>
          h(
            "th",
            { class: JOB_COUNTS.some(([, l]) => l === t) || t === "attempts" ? "n" : null },
            t,
          ),
        ),
      ),
    ),
    h(
      "tbody",
      {},
      jobs.map((job) =>
        h(
          "tr",
          { class: `job state-${job.state}` },
          h(
            "td",
            { class: "nowrap", title: `created ${epoch(job.created_at)}` },
            epoch(job.updated_at),
          ),
          showSpace
            ? h("td", {}, h("a", { href: href(["spaces", job.space, "timeline"]) }, job.space))
            : null,
          h("td", {}, h("code", { title: `job ${job.job_id}` }, job.session_id)),
          h(
            "td",
            {},
            badge(job.state),
            job.unchanged ? h("span", { class: "muted small" }, " unchanged") : null,
          ),
          h("td", { class: "reason" }, job.reason ?? ""),
          JOB_COUNTS.map(([k]) => h("td", { class: "n" }, job.counts[k] ?? "")),
          h("td", { class: "n" }, job.attempts),
          h(
            "td",
            {},
            h(
              "details",
              { class: "counts" },
              h("summary", {}, `all ${Object.keys(job.counts).length}`),
              h(
                "dl",
                {},
                Object.entries(job.counts).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

/** The jobs table, read again every few seconds while it is on the page. */
function liveJobs(params) {
  const body = h("div", { class: "section-body" }, h("p", { class: "muted" }, "Loading…"));
  const stamp = h("p", { class: "muted small live", "aria-live": "off" });
  const el = h("section", { class: "card", id: "jobs" }, stamp, body);
  const link = (at) => href([], { ...params, offset: at });
  async function tick() {
    try {
      const reply = await get(withQuery("v1/jobs", { ...params, limit: JOBS_PAGE }));
      const newer = params.offset > 0;
      const older = reply.items.length === JOBS_PAGE;
      const nav =
        newer || older
          ? h(
              "nav",
              { class: "pager", "aria-label": "pages of jobs" },
              newer ? h("a", { href: link(Math.max(0, params.offset - JOBS_PAGE)) }, "← newer") : null,
              older ? h("a", { href: link(params.offset + JOBS_PAGE) }, "older →") : null,
            )
          : null;
      // replaceChildren takes nodes (a null would show as the text "null")
      body.replaceChildren(...[jobsTable(reply.items), nav].filter(Boolean));
      stamp.textContent = `live: read ${new Date().toISOString().slice(11, 19)} UTC`;
    } catch (err) {
      body.replaceChildren(errorBox(err));
    }
    // Only while the table is shown: leaving the page (or signing out) stops the reads.
    if (el.isConnected) setTimeout(tick, REFRESH_MS);
  }
  tick();
  return el;
}

export async function overview({ query }) {
  const only = query.get("space") || "";
  const state = STATES.includes(query.get("state")) ? query.get("state") : "";
  const offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const spaces = get("v1/spaces");
  const stateIn = h(
    "select",
    { id: "job-state", name: "state" },
    h("option", { value: "" }, "any state"),
    STATES.map((st) => h("option", { value: st }, st)),
  );
  stateIn.value = state;
  const filter = h(
    "form",
    { class: "inline-form" },
    h("label", { for: "job-space" }, "Space"),
    h("input", {
      id: "job-space",
      name: "space",
      value: only,
      placeholder: "all spaces",
      size: 16,
    }),
    h("label", { for: "job-state" }, "State"),
    stateIn,
    h("button", { type: "submit" }, "Filter"),
  );
  filter.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = href([], { space: filter.elements.space.value.trim(), state: stateIn.value });
  });
  const title = [state ? `${state} jobs` : "Recent jobs", only ? ` in ${only}` : ""].join("");
  return h(
    "div",
    { class: "overview" },
    h("h1", {}, "Spaces"),
    section(null, spaces, spacesTable, { class: "card", id: "spaces" }),
    h("div", { class: "row-between" }, h("h1", {}, title), filter),
    liveJobs({ space: only, state, offset }),
  );
}
