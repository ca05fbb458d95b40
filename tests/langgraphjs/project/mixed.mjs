// A langgraph.json naming a Python graph and a TypeScript one (mixed.json), served by one
// mostrador: each runs in a runner of its language, both listed as assistants.
//
//   node mixed.mjs http://127.0.0.1:8123

import assert from "node:assert/strict";

import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2] });
const graphs = (await client.assistants.search({})).map((a) => a.graph_id).sort();
assert.deepEqual(graphs, ["echo", "mapreduce"]);
const thread = (await client.threads.create()).thread_id;
const python = await client.runs.wait(thread, "echo", { input: { said: "hola" } });
assert.equal(python.answer, "python heard hola");
const typescript = await client.runs.wait(null, "mapreduce", { input: { subjects: ["ants"] } });
assert.equal(typescript.best, "a joke about ants");
console.log("a Python and a TypeScript graph served side by side: ok");
