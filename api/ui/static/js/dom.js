// Building the page: every node is made with createElement and every piece of data goes in
// as text (textContent or a text node). No markup string is ever parsed, so a fact that
// holds "<script>" shows those characters and runs nothing.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

function assign(el, props) {
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) {
      if (typeof value !== "function") throw new TypeError(`${name} must be a function`);
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  return el;
}

/** An HTML element: h("a", {href: "#/", class: "x"}, "text", child, [more]). */
export function h(tag, props = {}, ...children) {
  return append(assign(document.createElement(tag), props), children);
}

/** An SVG element, the same way. */
export function s(tag, props = {}, ...children) {
  return append(assign(document.createElementNS(SVG_NS, tag), props), children);
}

/** A link to a view: the path's parts are percent-encoded, the query is optional. */
export function href(parts, query = {}) {
  const path = "#/" + parts.map(encodeURIComponent).join("/");
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== null && v !== undefined && v !== "") params.set(k, String(v));
  }
  const q = params.toString();
  return q ? `${path}?${q}` : path;
}

/** A message saying what went wrong: the API's `detail` and its status. */
export function errorBox(err, prefix = "") {
  const status = err && err.status ? `Error ${err.status}` : "Error";
  const detail = err && err.detail ? err.detail : String(err && err.message ? err.message : err);
  return h(
    "div",
    { class: "error", role: "alert" },
    h("strong", {}, prefix ? `${prefix} (${status})` : status),
    " ",
    h("span", { class: "detail" }, detail),
  );
}

/** A section that shows "Loading…" until `promise` settles, then what `render` makes of it,
 * or the error. */
export function section(title, promise, render, props = {}) {
  const body = h("div", { class: "section-body" }, h("p", { class: "muted" }, "Loading…"));
  const el = h("section", props, title ? h("h2", {}, title) : null, body);
  promise.then(
    (value) => body.replaceChildren(render(value)),
    (err) => body.replaceChildren(errorBox(err)),
  );
  return el;
}

export function chip(text, cls = "") {
  return h("span", { class: `chip ${cls}`.trim() }, text);
}

export function badge(state) {
  return h("span", { class: `badge state-${String(state).replace(/[^a-z-]/gi, "")}` }, state);
}

export function empty(text) {
  return h("p", { class: "muted empty" }, text);
}

/** Epoch seconds as "2024-06-02 20:00:05 UTC". */
export function epoch(seconds) {
  if (typeof seconds !== "number") return "—";
  return new Date(seconds * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC";
}

/** An ISO time from the API ("2024-06-02T20:00:00") as "2024-06-02 20:00". */
export function when(iso) {
  if (!iso) return "—";
  return String(iso).slice(0, 16).replace("T", " ");
}

export function num(x, digits = 3) {
  return typeof x === "number" ? x.toFixed(digits) : "—";
}

export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

/** Links to the pages before and after the one shown (`link(offset)` makes each), with
 * where this page lies: "events 26–50 of 1796". */
export function pager(offset, shown, total, size, link, noun) {
  return h(
    "nav",
    { class: "pager", "aria-label": `pages of ${noun}` },
    offset > 0 ? h("a", { href: link(Math.max(0, offset - size)), rel: "prev" }, "← earlier") : null,
    h(
      "span",
      { class: "muted" },
      shown ? `${noun} ${offset + 1}–${offset + shown} of ${total}` : `${total} ${noun}`,
    ),
    offset + shown < total ? h("a", { href: link(offset + size), rel: "next" }, "later →") : null,
  );
}

/** A one-field filter form: `onFilter(text)` gets the trimmed text on submit. */
export function filterForm(id, label, value, onFilter) {
  const input = h("input", {
    id,
    name: "text",
    type: "search",
    value,
    placeholder: "words…",
    autocomplete: "off",
    maxlength: 200,
  });
  const form = h(
    "form",
    { class: "inline-form filter", role: "search" },
    h("label", { for: id }, label),
    input,
    h("button", { type: "submit" }, "Filter"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    onFilter(input.value.trim());
  });
  return form;
}
