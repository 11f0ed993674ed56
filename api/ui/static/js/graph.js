// The recall graph of one search, drawn as SVG: seed facts on an inner circle, the facts the
// walk reached on an outer one (each placed near the seeds it links to), edges coloured by
// channel, hits labelled with their rank. Deterministic: the same reply draws the same picture.

import { h, s } from "./dom.js";

export const CHANNELS = ["keyword", "event", "turn"];
// Parallel edges of different channels bend apart instead of hiding one another.
const BEND = { keyword: 0, event: 16, turn: -16 };
const TAU = Math.PI * 2;

const ranked = (n) => n.rank !== null && n.rank !== undefined;

function byRank(a, b) {
  const ra = a.rank ?? Infinity;
  const rb = b.rank ?? Infinity;
  return ra - rb || b.activation - a.activation || a.fact_id.localeCompare(b.fact_id);
}

function circularMean(angles) {
  const x = angles.reduce((acc, a) => acc + Math.cos(a), 0);
  const y = angles.reduce((acc, a) => acc + Math.sin(a), 0);
  const mean = Math.atan2(y, x);
  return (mean - -Math.PI / 2 + TAU * 2) % TAU; // from the top, clockwise, in [0, 2π)
}

/** Positions by fact id, and the radius of the drawing. */
export function layout(graph) {
  const seeds = graph.nodes.filter((n) => n.role === "seed").sort(byRank);
  const expanded = graph.nodes.filter((n) => n.role !== "seed");
  const inner = seeds.length <= 1 ? 0 : Math.max(90, Math.min(170, seeds.length * 16));
  const outer = Math.max(inner + 120, (expanded.length * 30) / TAU);
  const pos = new Map();
  seeds.forEach((n, i) => {
    const a = -Math.PI / 2 + (TAU * i) / seeds.length;
    pos.set(n.fact_id, { x: inner * Math.cos(a), y: inner * Math.sin(a), a });
  });
  // Each reached fact goes near the seeds it is linked to, in a fixed order around the circle.
  const near = new Map(expanded.map((n) => [n.fact_id, []]));
  for (const e of graph.edges) {
    for (const [a, b] of [
      [e.source, e.target],
      [e.target, e.source],
    ]) {
      if (near.has(a) && pos.has(b)) near.get(a).push(pos.get(b).a);
    }
  }
  const wanted = (n) => (near.get(n.fact_id).length ? circularMean(near.get(n.fact_id)) : TAU);
  const order = expanded
    .map((n) => ({ n, w: wanted(n) }))
    .sort((p, q) => p.w - q.w || byRank(p.n, q.n));
  const start = order.length ? Math.min(order[0].w, TAU) : 0;
  order.forEach(({ n }, i) => {
    const a = -Math.PI / 2 + start + (TAU * i) / order.length;
    pos.set(n.fact_id, { x: outer * Math.cos(a), y: outer * Math.sin(a), a });
  });
  return { pos, radius: expanded.length ? outer : Math.max(inner, 60) };
}

function edgePath(p, q, bend) {
  const mx = (p.x + q.x) / 2;
  const my = (p.y + q.y) / 2;
  const dx = q.x - p.x;
  const dy = q.y - p.y;
  const len = Math.hypot(dx, dy) || 1;
  const cx = mx - (dy / len) * bend;
  const cy = my + (dx / len) * bend;
  const xy = (x, y) => `${x.toFixed(1)} ${y.toFixed(1)}`;
  return `M ${xy(p.x, p.y)} Q ${xy(cx, cy)} ${xy(q.x, q.y)}`;
}

function legend() {
  const swatch = (cls) =>
    s(
      "svg",
      { class: "swatch", viewBox: "0 0 28 12", width: 28, height: 12 },
      s("line", { x1: 1, x2: 27, y1: 6, y2: 6, class: `edge ${cls}` }),
    );
  const dot = (cls) =>
    s(
      "svg",
      { class: "swatch", viewBox: "0 0 14 14", width: 14, height: 14 },
      s("g", { class: `node ${cls}` }, s("circle", { cx: 7, cy: 7, r: 5.5 })),
    );
  return h(
    "ul",
    { class: "legend" },
    h("li", {}, dot("seed"), " seed (found by similarity)"),
    h("li", {}, dot("expanded"), " expanded (reached by the walk)"),
    CHANNELS.map((c) => h("li", {}, swatch(`ch-${c}`), ` ${c} edge`)),
    h("li", {}, h("span", { class: "rank-sample" }, "3"), " rank among the hits; size: activation"),
  );
}

/** The drawing, its legend and a panel that shows a node's fact; `select(id)` highlights one
 * node (also called when the node is clicked, with `onSelect`). */
export function recallGraph(graph, onSelect = () => {}) {
  const { pos, radius } = layout(graph);
  const size = radius + 40;
  const maxW = Math.max(1e-9, ...graph.edges.map((e) => e.weight));
  const maxA = Math.max(1e-9, ...graph.nodes.map((n) => n.activation));
  const drawn = graph.edges.filter((e) => pos.has(e.source) && pos.has(e.target));
  const edges = drawn.map((e) =>
    s(
      "path",
      {
        class: `edge ch-${CHANNELS.includes(e.channel) ? e.channel : "other"}`,
        d: edgePath(pos.get(e.source), pos.get(e.target), BEND[e.channel] ?? 8),
        "stroke-width": (0.8 + 2.6 * (e.weight / maxW)).toFixed(2),
        dataset: { source: e.source, target: e.target, channel: e.channel },
      },
      s("title", {}, `${e.channel} · weight ${e.weight.toFixed(3)}`),
    ),
  );
  const nodes = [...graph.nodes]
    .sort(byRank)
    .reverse()
    .map((n) => {
      const p = pos.get(n.fact_id);
      const r = 7 + 9 * Math.sqrt(Math.max(0, n.activation) / maxA);
      const g = s(
        "g",
        {
          class: `node ${n.role === "seed" ? "seed" : "expanded"}${ranked(n) ? " hit" : ""}`,
          transform: `translate(${p.x.toFixed(1)} ${p.y.toFixed(1)})`,
          tabindex: 0,
          role: "button",
          "aria-label": n.text,
          dataset: { factId: n.fact_id, rank: n.rank ?? "" },
        },
        s("circle", { r: r.toFixed(1) }),
        ranked(n)
          ? s("text", { class: "rank", "text-anchor": "middle", dy: "0.35em" }, String(n.rank + 1))
          : null,
        s(
          "title",
          {},
          `${ranked(n) ? `#${n.rank + 1} · ` : ""}${n.role} · activation ` +
            `${n.activation.toFixed(3)}\n${n.text}`,
        ),
      );
      return g;
    });
  const svg = s(
    "svg",
    {
      class: "recall-graph",
      viewBox: `${-size} ${-size} ${2 * size} ${2 * size}`,
      role: "group",
      "aria-label": "recall graph",
    },
    s("g", { class: "edges" }, edges),
    s("g", { class: "nodes" }, nodes),
  );
  const info = h("div", { class: "node-info muted" }, "Hover or click a node to read its fact.");
  const byId = new Map(graph.nodes.map((n) => [n.fact_id, n]));

  function select(id) {
    const n = byId.get(id);
    for (const g of svg.querySelectorAll("g.node"))
      g.classList.toggle("selected", g.dataset.factId === id);
    for (const e of svg.querySelectorAll("path.edge"))
      e.classList.toggle("lit", e.dataset.source === id || e.dataset.target === id);
    svg.classList.toggle("focused", Boolean(n));
    if (!n) return;
    info.classList.remove("muted");
    info.replaceChildren(
      h(
        "div",
        { class: "node-meta" },
        h("span", { class: `chip role-${n.role}` }, n.role),
        ranked(n) ? h("span", { class: "chip" }, `rank ${n.rank + 1}`) : null,
        h("span", { class: "chip" }, `activation ${n.activation.toFixed(3)}`),
      ),
      h("p", { class: "node-text" }, n.text),
    );
  }
  for (const g of nodes) {
    const pick = () => {
      select(g.dataset.factId);
      onSelect(g.dataset.factId);
    };
    g.addEventListener("click", pick);
    g.addEventListener("mouseenter", pick);
    g.addEventListener("focus", pick);
  }
  const stats = h(
    "p",
    { class: "muted small" },
    `${graph.nodes.length} nodes (${graph.local_nodes} in the local graph) · ` +
      `${drawn.length} edges drawn of ${graph.edges_total}`,
  );
  return { element: h("div", { class: "graph" }, svg, stats, legend(), info), select };
}
