// Run by tests/e2e/test_ts_client.py against `atommem serve` (ATOMMEM_URL, ATOMMEM_KEY):
// a mem0-style chat goes in as messages, comes back as a context block with citations, and
// answers a question; errors carry the server's status and detail.
import assert from "node:assert/strict";
import { test } from "node:test";

import { AtomMem, AtomMemError } from "../dist/index.js";

const mem = new AtomMem(process.env.ATOMMEM_URL, process.env.ATOMMEM_KEY);
const chat = [
  { role: "system", content: "You are a friendly assistant." },
  { role: "user", content: "I moved to Porto in May and I started learning the oboe." },
  { role: "assistant", content: "Porto is lovely. How is the oboe going?" },
];

test("messages in, a context block with citations and an answer out", async () => {
  await mem.createSpace("lea");
  const jobs = await mem.addMessages("lea", chat, { user: "Lea", conversation_id: "web-1" });
  assert.equal(jobs.length, 1);
  assert.ok(jobs[0].session_id.startsWith("web-1-"));
  const again = await mem.addMessages("lea", chat, { user: "Lea", conversation_id: "web-1" });
  assert.deepEqual(again.map((j) => j.job_id), jobs.map((j) => j.job_id));
  const [done] = await mem.wait(jobs.map((j) => j.job_id), 300_000);
  assert.equal(done.state, "done");

  const block = await mem.context("lea", "Which instrument is Lea learning?", { max_tokens: 300 });
  assert.ok(block.tokens <= 300);
  assert.match(block.text, /oboe/);
  for (const item of block.items) assert.ok(block.text.includes(`[${item.label}]`));
  const fact = block.items.find((i) => i.kind === "fact" && /oboe/.test(i.text));
  assert.ok(fact && fact.session_id === jobs[0].session_id && fact.turn_ids.length > 0);

  const found = await mem.search("lea", "Which instrument is Lea learning?", { k: 3 });
  assert.ok(found.hits.length > 0 && found.hits.every((h) => h.relevance >= 0.28));
  const answered = await mem.ask("lea", "Which instrument is Lea learning?");
  assert.match(answered.answer, /oboe/);
  assert.ok(answered.answer_fact_ids.length > 0);
});

test("an error carries the status and the server's detail", async () => {
  await assert.rejects(mem.search("nowhere", "anything"), (err) => {
    assert.ok(err instanceof AtomMemError);
    assert.equal(err.status, 404);
    assert.match(err.detail, /does not exist/);
    return true;
  });
  await assert.rejects(mem.addMessages("lea", [{ role: "bot", content: "x" }]), (err) => {
    assert.equal(err.status, 422);
    assert.match(err.detail, /role/);
    return true;
  });
});
