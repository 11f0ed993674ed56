// The inspector's only door to memory: the API's own /v1 routes, with the signed-in tenant's
// key, so it sees exactly what that key may see.

const KEY = "atommem.inspector.key";
// The page is served at <api>/ui/, so the API is one level up (also behind a path prefix).
const BASE = new URL("..", document.baseURI);
const PAGE_LIMIT = 1000;
const ID_BATCH = 100; // ids per request: the query stays well inside a URL's length

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

/** `path` with a query: each value set (an array as the parameter repeated). */
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (v !== null && v !== undefined && v !== "") q.append(name, String(v));
    }
  }
  const text = q.toString();
  return text ? `${path}${path.includes("?") ? "&" : "?"}${text}` : path;
}

/** Every item of a paged listing (`total`, `offset`, `items`) the filters in `params` let
 * through, a page at a time: only for listings a filter keeps small. */
export async function all(path, params = {}) {
  const items = [];
  for (;;) {
    const page = await get(withQuery(path, { ...params, limit: PAGE_LIMIT, offset: items.length }));
    items.push(...page.items);
    if (page.items.length === 0 || items.length >= page.total) return items;
  }
}

/** The facts with these ids (those still stored), by id: the listing's `id` filter, in
 * batches it takes. */
export async function factsById(name, ids) {
  const unique = [...new Set(ids)];
  const batches = [];
  for (let i = 0; i < unique.length; i += ID_BATCH) batches.push(unique.slice(i, i + ID_BATCH));
  const found = await Promise.all(batches.map((id) => all(space(name, "facts"), { id })));
  return new Map(found.flat().map((f) => [f.id, f]));
}
