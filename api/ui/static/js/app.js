// The inspector's shell: sign-in, hash routing (#/spaces/NAME/VIEW?query), the space header
// and its tabs. Each view is a module that returns the nodes it drew.

import { ApiError, clearKey, get, getKey, request, setKey, space } from "./api.js";
import { errorBox, h, href, plural } from "./dom.js";
import { erase } from "./erase.js";
import { events } from "./events.js";
import { facts } from "./facts.js";
import { overview } from "./overview.js";
import { profiles } from "./profiles.js";
import { review } from "./review.js";
import { search } from "./search.js";
import { timeline } from "./timeline.js";

const TABS = [
  ["timeline", "Timeline", timeline],
  ["facts", "Facts", facts],
  ["events", "Events", events],
  ["profiles", "Profiles", profiles],
  ["search", "Search", search],
  ["erase", "Erase", erase],
];

const view = document.getElementById("view");
const crumbs = document.getElementById("crumbs");
const signOutButton = document.getElementById("sign-out");
let generation = 0;

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, qs = ""] = raw.split("?", 2);
  const parts = path
    .split("/")
    .filter(Boolean)
    .map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
  return { parts, query: new URLSearchParams(qs) };
}

function signIn(message) {
  generation++;
  signOutButton.hidden = true;
  crumbs.replaceChildren();
  const input = h("input", {
    id: "key",
    name: "key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "amk_…",
    required: true,
  });
  const status = h(
    "div",
    { class: "signin-status" },
    message ? errorBox({ status: 401, detail: message }, "Sign-in failed") : null,
  );
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    { class: "signin card", novalidate: true },
    h("h1", {}, "Sign in"),
    h(
      "p",
      { class: "muted" },
      "Use a tenant's API key. It stays in this tab (sessionStorage) and goes with every " +
        "request to the API's /v1 routes, so you see what that key may see.",
    ),
    h("label", { for: "key" }, "API key"),
    input,
    button,
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) {
      status.replaceChildren(errorBox({ detail: "enter a key" }, "Sign-in failed"));
      return;
    }
    button.disabled = true;
    status.replaceChildren(h("p", { class: "muted" }, "Checking the key…"));
    try {
      // The job listing reads Redis only: it answers whether or not a worker runs.
      await request("GET", "v1/jobs?limit=1", { key });
    } catch (err) {
      if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
        button.disabled = false;
        status.replaceChildren(errorBox(err, "Sign-in failed"));
        input.select();
        return;
      }
      // Anything else (a worker or Redis down) is for the views to show: the key passed.
    }
    setKey(key);
    render();
  });
  view.replaceChildren(form);
  input.focus();
}

function setCrumbs(parts) {
  const trail = [h("a", { href: "#/" }, "Spaces"), h("span", { class: "sep" }, "·"), h("a", { href: "#/review" }, "Review")];
  if (parts[0] === "spaces" && parts[1]) {
    trail.push(
      h("span", { class: "sep" }, "/"),
      h("a", { href: href(["spaces", parts[1]]) }, parts[1]),
    );
  }
  crumbs.replaceChildren(...trail);
}

function spaceHeader(info, name, current) {
  const c = info.counts;
  return h(
    "div",
    { class: "space-head" },
    h(
      "div",
      { class: "space-title" },
      h("h1", {}, info.name),
      h(
        "p",
        { class: "muted" },
        `${plural(c.sessions, "session")} · ${plural(c.facts, "fact")} · ${plural(c.events, "event")} · ` +
          `${plural(c.profiles, "profile")} · ${info.participants.join(", ") || "no participants"}`,
      ),
    ),
    h(
      "nav",
      { class: "tabs", "aria-label": "views of this space" },
      TABS.map(([id, label]) =>
        h(
          "a",
          {
            href: href(["spaces", name, id]),
            class: id === current ? "tab current" : "tab",
            "aria-current": id === current ? "page" : null,
          },
          label,
        ),
      ),
    ),
  );
}

async function resolve(parts, query) {
  if (parts.length === 0) return overview({ query });
  if (parts[0] === "review" && parts.length <= 2) {
    const index = parts[1] === undefined ? null : Number(parts[1]);
    if (index !== null && !Number.isInteger(index)) throw new ApiError(404, `no sample ${parts[1]}`);
    return review({ index });
  }
  if (parts[0] === "spaces" && parts.length >= 2 && parts.length <= 3) {
    const name = parts[1];
    const tab = TABS.find(([id]) => id === (parts[2] ?? "timeline"));
    if (!tab) throw new ApiError(404, `no view ${parts[2]}`);
    const info = await get(space(name));
    const body = await tab[2]({ space: name, info, query });
    return h("div", { class: `space view-${tab[0]}` }, spaceHeader(info, name, tab[0]), body);
  }
  throw new ApiError(404, `no page at ${location.hash}`);
}

async function render() {
  if (!getKey()) {
    signIn();
    return;
  }
  const gen = ++generation;
  signOutButton.hidden = false;
  const { parts, query } = parseHash();
  setCrumbs(parts);
  view.replaceChildren(h("p", { class: "muted loading" }, "Loading…"));
  let node;
  try {
    node = await resolve(parts, query);
  } catch (err) {
    node = errorBox(err);
  }
  if (gen === generation && getKey()) view.replaceChildren(node);
}

window.addEventListener("atommem:unauthorized", (event) => {
  clearKey();
  signIn(event.detail);
});
window.addEventListener("hashchange", render);
signOutButton.addEventListener("click", () => {
  clearKey();
  signIn();
});
render();
