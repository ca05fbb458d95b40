// mostrador's helper for the api, for a JavaScript project's own code: `node api.mjs
// <langgraph.json> --api` loads its `auth.path` (an `Auth` of `@langchain/langgraph-sdk/auth`)
// and answers the api's questions with the official JS server's semantics
// (`@langchain/langgraph-api`'s `auth/index.mjs`), many at once, one JSON line each; the api's
// side is `api/src/project_code.rs`, the Python twin `mostrador_runner/auth.py`.
//
// * `{"t": "authenticate", "id", "method", "path", "query", "headers": [[name, value], ...]}`:
//   the `authenticate` callback, given the request, returns the user: `{"user", "permissions"}`.
// * `{"t": "event", "id", "user", "permissions", "resource", "action", "value"}`: the most
//   specific `on` callback; the value as it left it, and the filter it returned:
//   `{"value", "filter"}`; `false` is a 403.
// A refusal is `{"error": {"status", "detail", "headers"}}`, a failure `{"error": {"bug", "detail"}}`.

import { openSync, readFileSync, writeSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

import { loadConfig, registerTypeScript } from "./project.mjs";

// What the project's code prints goes to standard error, never into the protocol.
const protocolOut = openSync("/dev/stdout", "w");
process.stdout.write = process.stderr.write.bind(process.stderr);
for (const name of Object.keys(process.env)) {
  if (name.startsWith("MOSTRADOR_RUNNER_")) delete process.env[name];
}

const send = (message) => writeSync(protocolOut, `${JSON.stringify(message)}\n`);

// The `Auth` object `auth.path` names (`./src/auth.ts:auth`, `default` without a name).
async function loadAuth(configPath) {
  const { base } = loadConfig(configPath);
  const where = JSON.parse(readFileSync(configPath, "utf8")).auth?.path;
  const [file, name] = String(where).split(":", 2);
  if (/\.(ts|mts|cts|tsx)$/.test(file)) await registerTypeScript(base);
  const module = await import(pathToFileURL(path.resolve(base, file)).href);
  const auth = module[name || "default"];
  if (auth == null) throw new Error(`auth.path ${where} names nothing`);
  if (!("~handlerCache" in auth)) throw new Error(`auth.path ${where} is not an Auth of @langchain/langgraph-sdk/auth`);
  return auth["~handlerCache"];
}

// An `HTTPException` (anything with a status and headers) is the answer it says; anything else
// the project's code's failure.
function refusal(err) {
  if (err != null && typeof err === "object" && "status" in err && "headers" in err) {
    const headers = Object.fromEntries(new Headers(err.headers ?? {}).entries());
    return { status: err.status, detail: err.message || "Unauthorized", headers };
  }
  return { bug: true, detail: String(err?.stack ?? err) };
}

// The user as the official server keeps it: a string is an identity; an object needs one.
function normalized(response) {
  if (typeof response === "string") {
    return {
      permissions: [],
      user: { permissions: [], identity: response, display_name: response, is_authenticated: true },
    };
  }
  if (response != null && typeof response === "object" && typeof response.identity === "string") {
    const permissions = Array.isArray(response.permissions) ? response.permissions : [];
    return {
      permissions,
      user: {
        ...response,
        permissions,
        is_authenticated: response.is_authenticated ?? true,
        display_name: response.display_name ?? response.identity,
      },
    };
  }
  throw new Error(
    "Invalid auth response received. Make sure to either return a `string` or an object with `identity` property.",
  );
}

async function authenticate(handlers, message) {
  const headers = new Headers();
  for (const [name, value] of message.headers) {
    try {
      headers.append(name, value);
    } catch {
      // A header fetch's Headers refuses is one no handler could read.
    }
  }
  const host = headers.get("host") ?? "localhost";
  const url = `http://${host}${message.path}${message.query ? `?${message.query}` : ""}`;
  const { user, permissions } = normalized(await handlers.authenticate(new Request(url, { method: message.method, headers })));
  return { user, permissions };
}

async function authorize(handlers, message) {
  const { resource, action, value } = message;
  const key = [`${resource}:${action}`, `${resource}`, `*:${action}`, "*"].find((k) => handlers.callbacks?.[k]);
  if (key == null) return { value, filter: null };
  const result = await handlers.callbacks[key]({
    event: `${resource}:${action}`,
    resource,
    action,
    value,
    permissions: message.permissions,
    user: message.user,
  });
  if (result == null || result === true) return { value, filter: null };
  if (result === false) throw { status: 403, message: "Forbidden", headers: {} };
  if (typeof result !== "object") {
    throw new Error(
      `Auth handler returned invalid result. Expected filter object, null, undefined or boolean. Got "${typeof result}" instead.`,
    );
  }
  return { value, filter: result };
}

const handlers = await loadAuth(process.argv[2]);
// The api asks a callback only for what one is registered for: `threads:create` is
// (threads, create), `threads` (threads, *), `*:create` (*, create), `*` (*, *).
const registered = Object.keys(handlers.callbacks ?? {}).map((key) => {
  const [resource, action] = key.split(":", 2);
  return [resource, action ?? "*"];
});
send({ t: "ready", pid: process.pid, authenticate: typeof handlers.authenticate === "function", handlers: registered });

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  const message = JSON.parse(line);
  const answer = message.t === "authenticate" ? authenticate(handlers, message) : authorize(handlers, message);
  answer.then(
    (result) => send({ id: message.id, ...result }),
    (err) => send({ id: message.id, error: refusal(err) }),
  );
});
// The api is gone: nothing left to answer.
lines.on("close", () => process.exit(0));
