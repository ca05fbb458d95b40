// The protocol's contract, on the JavaScript runner's side (the Python runner's is
// `python/tests/test_protocol.py`): against every message of `../python/protocol-examples.json`,
// which the worker's own test writes back unchanged, this runner must read every field the worker
// sends it, handle every kind of message, and send only kinds and operations the worker knows.
// A field one side sends and the other ignores fails here.
//
//   node worker/js/contract.mjs

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";

const here = new URL(".", import.meta.url);
const examples = JSON.parse(readFileSync(new URL("../python/protocol-examples.json", here), "utf8"));
const source = Object.fromEntries(
  readdirSync(here)
    .filter((file) => file.endsWith(".mjs") && file !== "contract.mjs")
    .map((file) => [file, readFileSync(new URL(file, here), "utf8")]),
);
const all = Object.values(source).join("\n");
const found = (pattern, text = all) => new Set([...text.matchAll(pattern)].map((match) => match[1]));

// Every message the worker sends is handled.
const handled = found(/message\.t === "(\w+)"/g);
for (const message of examples.to_runner) {
  assert.ok(handled.has(message.t), `the runner handles no "${message.t}"`);
}

// Every field of a describe is read.
const runner = source["runner.mjs"];
const messageRead = found(/message\.(\w+)/g, runner);
for (const message of examples.to_runner.filter((m) => m.t === "describe")) {
  for (const field of Object.keys(message)) {
    assert.ok(messageRead.has(field), `the runner reads no describe.${field}`);
  }
}

// Every field of a run's spec, and of its command, is read.
const run = source["run.mjs"];
const read = found(/spec\??\.(\w+)/g, run);
const commandRead = new Set([...found(/command\??\.(\w+)/g, run), ...found(/"(\w+)" in command/g, run)]);
for (const message of examples.to_runner.filter((m) => m.t === "start")) {
  for (const field of Object.keys(message.spec)) {
    assert.ok(read.has(field), `the runner reads no spec.${field}`);
  }
  for (const field of Object.keys(message.spec.command ?? {})) {
    assert.ok(commandRead.has(field), `the runner reads no command.${field}`);
  }
}

// What it sends is what the worker knows.
const kinds = new Set(examples.from_runner.map((message) => message.t));
for (const kind of found(/\bt: "(\w+)"/g)) assert.ok(kinds.has(kind), `the worker knows no "${kind}"`);
const ops = (kind, key) => new Set(examples.from_runner.filter((m) => m.t === kind).map((m) => m[key].op));
const casts = ops("cast", "cast");
for (const op of found(/\.cast\("(\w+)"/g)) assert.ok(casts.has(op), `the worker knows no cast "${op}"`);
const calls = ops("call", "call");
for (const op of found(/\.call\("(\w+)"/g)) assert.ok(calls.has(op), `the worker knows no call "${op}"`);

console.log("the JavaScript runner's side of the protocol: ok");
