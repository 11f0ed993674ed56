// The inspector's only door to memory: the API's own /v1 routes, with the signed-in tenant's
// key, so it sees exactly what that key may see.

const KEY = "atommem.inspector.key";
// The page is served at <api>/ui/, so the API is one level up (also behind a path prefix).
const BASE = new URL("..", document.baseURI);
const PAGE_LIMIT = 1000;

export class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
    this.detail = detail;
  }
}

export function getKey() {
  return sessionStorage.getItem(KEY);
}

export function setKey(key) {
  sessionStorage.setItem(KEY, key);
}

export function clearKey() {
  sessionStorage.removeItem(KEY);
}

/** `value` as one URL path segment. '', '.' and '..' cannot be one: the URL would resolve
 * them against the path around them and reach another resource (`sessions/..` is the space
 * itself), so no space, session or item has such a name. */
export function seg(value) {
  const text = String(value);
  if (text === "" || text === "." || text === "..") {
    throw new ApiError(400, `'${text}' cannot be a name or id: no space, session or item has it`);
  }
  return encodeURIComponent(text);
}

/** The path of a route under a space: space("alice", "facts", id) → v1/spaces/alice/facts/id. */
export function space(name, ...rest) {
  return ["v1", "spaces", name, ...rest].map((p, i) => (i < 2 ? p : seg(p))).join("/");
}

/** One request; the reply's JSON, or an ApiError carrying the API's `detail`. A 401 also
 * tells the page to sign in again. */
export async function request(method, path, { body, key } = {}) {
  const headers = { Authorization: `Bearer ${key ?? getKey() ?? ""}`, Accept: "application/json" };
  // No /v1 route answers with a redirect: following one (the router's trailing-slash 307)
  // would send this method, key and body to another route than the one asked for.
  const init = { method, headers, cache: "no-store", redirect: "error" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(new URL(path, BASE), init);
  } catch (err) {
    throw new ApiError(0, `the API did not answer (${err.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail =
      data && typeof data.detail === "string"
        ? data.detail
        : `${response.status} ${response.statusText || "error"}`.trim();
    const error = new ApiError(response.status, detail);
    if (response.status === 401 && key === undefined) {
      window.dispatchEvent(new CustomEvent("atommem:unauthorized", { detail }));
    }
    throw error;
  }
  return data;
}

export const get = (path) => request("GET", path);

/** Every item of a paged listing (`total`, `offset`, `items`), a page at a time. */
export async function all(path) {
  const items = [];
  const sep = path.includes("?") ? "&" : "?";
  for (;;) {
    const page = await get(`${path}${sep}limit=${PAGE_LIMIT}&offset=${items.length}`);
    items.push(...page.items);
    if (page.items.length === 0 || items.length >= page.total) return items;
  }
}

/** The space's facts by id. */
export async function factsById(name) {
  const facts = await all(space(name, "facts"));
  return new Map(facts.map((f) => [f.id, f]));
}
