// A langgraph.json naming a Python graph and a TypeScript one (mixed.json), served by one
// mostrador: each runs in a runner of its language, both listed as assistants.
//
//   node mixed.mjs http://127.0.0.1:8123

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2] });
const graphs = (await client.assistants.search({})).map((a) => a.graph_id).sort();
assert.deepEqual(graphs, ["agent", "echo", "mapreduce", "recall"]);
const thread = (await client.threads.create()).thread_id;
const python = await client.runs.wait(thread, "echo", { input: { said: "hola" } });
assert.equal(python.answer, "python heard hola");
const typescript = await client.runs.wait(null, "mapreduce", { input: { subjects: ["ants"] } });
assert.equal(typescript.best, "a joke about ants");
console.log("a Python and a TypeScript graph served side by side: ok");

// A TypeScript graph's semantic search under the project's store.index (a Python embedding
// function, which the worker runs for it): the nearest memory first, with its score.
const recalled = await client.runs.wait(null, "recall", { input: { query: "green tea" } });
assert.deepEqual(recalled.recalled[0], "tea:true", JSON.stringify(recalled));
console.log("a TypeScript graph's semantic search, nearest first: ok");

// A TypeScript run's model and tool calls are spans of the run's trace (the collector writes
// each span it receives as a line of the file SPANS names), under the run's span.
const agentThread = (await client.threads.create()).thread_id;
const weather = { messages: [{ role: "user", content: "What is the weather in Paris?" }] };
const run = await client.runs.create(agentThread, "agent", { input: weather });
await client.runs.join(agentThread, run.run_id);
const received = () =>
  readFileSync(process.env.SPANS, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
for (let i = 0; ; i++) {
  const spans = received();
  const runSpan = spans.find((span) => span.name === "run" && span.attributes.run_id === run.run_id);
  const under = spans.filter((span) => runSpan && span.parent === runSpan.span_id);
  const models = under.filter((span) => span.name === "model call");
  const tools = under.filter((span) => span.name === "tool call");
  if (models.length === 2 && tools.length === 1) {
    assert.equal(tools[0].attributes.tool, "get_weather");
    assert.ok(under.every((span) => span.trace_id === runSpan.trace_id));
    break;
  }
  if (i === 100) {
    console.error(JSON.stringify(spans, null, 1));
    throw new Error("the run's span has not two model calls and a tool call under it");
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}
console.log("a TypeScript run's model and tool calls, spans under its own: ok");
