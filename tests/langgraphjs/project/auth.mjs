// A TypeScript project's own auth and routes (`auth.json`: `auth.path` is `./src/auth.ts:auth`, an
// `Auth` of `@langchain/langgraph-sdk/auth`; `http.app` is `./src/app.ts:app`, a Hono app) served
// by the official JS server and by mostrador, driven with the same calls of the official JS SDK
// (and plain requests to the app's routes) as three users and two strangers: every answer must be
// the same on both, and the one the handlers were written to give. Exits 1 naming each answer
// that differs.
//
//   node auth.mjs http://127.0.0.1:2024 http://127.0.0.1:8123

import { Client } from "@langchain/langgraph-sdk";

const [officialUrl, mostradorUrl] = process.argv.slice(2);

// What the handlers say, which both servers must pass on as they are.
const HANDLER_DETAILS = ["Missing token", "Invalid token", "Writers only", "Only Alice deletes threads"];

const client = (url, token) =>
  new Client({ apiUrl: url, defaultHeaders: token ? { Authorization: `Bearer ${token}` } : {} });

// A refused call: its status, and the handler's words if they reached the client.
function refusal(err) {
  const text = `${err?.message ?? ""} ${JSON.stringify(err ?? {})}`;
  const status = err?.status ?? Number(/HTTP (\d{3})|(\d{3})/.exec(text)?.slice(1).find(Boolean));
  return { error: { status, detail: HANDLER_DETAILS.find((detail) => text.includes(detail)) ?? null } };
}

async function outcome(call) {
  try {
    return await call();
  } catch (err) {
    return refusal(err);
  }
}

// What a user reads of an answer: a thread's metadata, a run's status, a state's values.
const view = (result) => {
  if (Array.isArray(result)) return result.map(view);
  if (result?.thread_id && "metadata" in result) return { owner: result.metadata?.owner ?? null };
  if (result?.run_id) return { status: result.status };
  return result ?? null;
};

async function drive(url) {
  const alice = client(url, "user1-token");
  const bob = client(url, "user2-token");
  const rita = client(url, "reader-token");
  const answers = {};
  const record = async (name, call) => {
    answers[name] = view(await outcome(call));
  };
  await record("stranger/search", () => client(url).threads.search());
  await record("forger/search", () => client(url, "forged").threads.search());
  const thread = await alice.threads.create({ metadata: { topic: "refund" } });
  answers["alice/create"] = view(thread);
  await record("rita/create", () => rita.threads.create());
  await record("bob/get alice's", () => bob.threads.get(thread.thread_id));
  await record("bob/search", () => bob.threads.search());
  await record("alice/search", () => alice.threads.search());
  await record("rita/run on alice's", () =>
    rita.runs.wait(thread.thread_id, "approval", { input: { request: "refund" } }),
  );
  await record("bob/run on alice's", () =>
    bob.runs.wait(thread.thread_id, "approval", { input: { request: "refund" } }),
  );
  await record("alice/run", () => alice.runs.wait(thread.thread_id, "approval", { input: { request: "refund" } }));
  await record("alice/state", async () => (await alice.threads.getState(thread.thread_id)).values);
  await record("alice/resume", () => alice.runs.wait(thread.thread_id, "approval", { command: { resume: "yes" } }));
  // The project's own routes (http.app), behind its auth as every route of the official server.
  const http = async (method, route, token, body) => {
    const headers = { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) };
    const response = await fetch(`${url}${route}`, { method, headers, body: body && JSON.stringify(body) });
    const text = await response.text();
    let parsed = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // A text answer.
    }
    return { status: response.status, body: response.status < 400 ? parsed : null };
  };
  answers["app/hello as alice"] = await http("GET", "/hello", "user1-token");
  answers["app/hello as a stranger"] = await http("GET", "/hello");
  answers["app/greet"] = await http("GET", "/greet/ana", "user2-token");
  answers["app/echo"] = await http("POST", "/echo?q=1", "user2-token", { a: [1, 2] });
  answers["app/files"] = await http("GET", "/files/a/b.txt", "user1-token");
  const bobs = await bob.threads.create();
  answers["bob/create"] = view(bobs);
  await record("bob/delete his own", () => bob.threads.delete(bobs.thread_id));
  await record("alice/delete bob's", () => alice.threads.delete(bobs.thread_id));
  await record("alice/delete hers", () => alice.threads.delete(thread.thread_id));
  await record("alice/get hers, deleted", () => alice.threads.get(thread.thread_id));
  return answers;
}

// What the handlers were written to give: two equal failures cannot pass.
const EXPECTED = {
  "stranger/search": { error: { status: 401, detail: "Missing token" } },
  "forger/search": { error: { status: 401, detail: "Invalid token" } },
  "alice/create": { owner: "user1" },
  "rita/create": { error: { status: 403, detail: "Writers only" } },
  "bob/get alice's": { error: { status: 404, detail: null } },
  "bob/search": [],
  "alice/search": [{ owner: "user1" }],
  "rita/run on alice's": { error: { status: 403, detail: null } },
  "alice/resume": { request: "refund", steps: ["drafted refund", "reviewed", "applied"], decision: "yes" },
  "bob/delete his own": { error: { status: 403, detail: "Only Alice deletes threads" } },
  "alice/get hers, deleted": { error: { status: 404, detail: null } },
  "app/hello as alice": { status: 200, body: { hello: "world", caller: "user1" } },
  "app/hello as a stranger": { status: 401, body: null },
  "app/greet": { status: 200, body: "hola, ana" },
  "app/echo": { status: 201, body: { got: { a: [1, 2] }, query: "1" } },
  "app/files": { status: 200, body: "/files/a/b.txt" },
};

// Keys in one order, and an interrupt's id (random on both servers) masked.
const canonical = (value) => {
  if (Array.isArray(value)) return value.map(canonical);
  if (value == null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, key === "id" && /^[0-9a-f]{32}$/.test(value[key]) ? "<id>" : canonical(value[key])]),
  );
};

const official = canonical(await drive(officialUrl));
const mostrador = canonical(await drive(mostradorUrl));
const failures = [];
for (const name of Object.keys(official)) {
  const [theirs, ours] = [JSON.stringify(official[name]), JSON.stringify(mostrador[name])];
  if (theirs !== ours) failures.push(`${name}: official ${theirs}, mostrador ${ours}`);
  if (name in EXPECTED && JSON.stringify(canonical(EXPECTED[name])) !== ours) {
    failures.push(`${name}: expected ${JSON.stringify(EXPECTED[name])}, mostrador ${ours}`);
  }
}
console.log(`auth.path and http.app in TypeScript: ${Object.keys(official).length} answers compared, ${failures.length} differences`);
for (const failure of failures) console.log(`  ${failure}`);
process.exit(failures.length ? 1 : 0);
