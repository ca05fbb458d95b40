// mostrador's helper for the api, for a JavaScript project's own code: `node api.mjs
// <langgraph.json> --api` loads its `auth.path` (an `Auth` of `@langchain/langgraph-sdk/auth`)
// and its `http.app` (a Hono app), and answers the api's questions with the official JS server's
// semantics (`@langchain/langgraph-api`'s `auth/index.mjs` and `server.mjs`), many at once, one
// JSON line each; the api's side is `api/src/project_code.rs`, the Python twins
// `mostrador_runner/auth.py` and `routes.py`.
//
// * `{"t": "authenticate", "id", "method", "path", "query", "headers": [[name, value], ...]}`:
//   the `authenticate` callback, given the request, returns the user: `{"user", "permissions"}`.
// * `{"t": "event", "id", "user", "permissions", "resource", "action", "value"}`: the most
//   specific `on` callback; the value as it left it, and the filter it returned:
//   `{"value", "filter"}`; `false` is a 403.
// * `{"t": "http", "id", "method", "path", "query", "headers", "body": base64, "user",
//   "permissions"}`: the request through the app (its handlers read the caller as the official
//   server's do, `c.get("auth")`: `{user, scopes}`), the answer as it comes: `{"start": {"status",
//   "headers"}}`, `{"chunk": base64}` for each part of the body, then `{"end": true}`.
// A refusal is `{"error": {"status", "detail", "headers"}}`, a failure `{"error": {"bug", "detail"}}`.

import { openSync, readFileSync, writeSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

import { loadConfig, projectImport, registerTypeScript } from "./project.mjs";

// What the project's code prints goes to standard error, never into the protocol.
const protocolOut = openSync("/dev/stdout", "w");
process.stdout.write = process.stderr.write.bind(process.stderr);
for (const name of Object.keys(process.env)) {
  if (name.startsWith("MOSTRADOR_RUNNER_")) delete process.env[name];
}

const send = (message) => writeSync(protocolOut, `${JSON.stringify(message)}\n`);

// What `where` (`./src/auth.ts:auth`, `default` without a name) names in the project.
async function loadExport(base, key, where) {
  const [file, name] = String(where).split(":", 2);
  if (/\.(ts|mts|cts|tsx)$/.test(file)) await registerTypeScript(base);
  const module = await import(pathToFileURL(path.resolve(base, file)).href);
  const found = module[name || "default"];
  if (found == null) throw new Error(`${key} ${where} names nothing`);
  return found;
}

// The `Auth` object `auth.path` names: its callbacks.
async function loadAuth(base, where) {
  const auth = await loadExport(base, "auth.path", where);
  if (!("~handlerCache" in auth)) throw new Error(`auth.path ${where} is not an Auth of @langchain/langgraph-sdk/auth`);
  return auth["~handlerCache"];
}

// The Hono app `http.app` names, mounted as the official server mounts it, under a middleware
// that gives its handlers the caller the api authenticated (`c.get("auth")`).
async function loadApp(base, where) {
  const app = await loadExport(base, "http.app", where);
  if (typeof app.fetch !== "function" || !Array.isArray(app.routes)) {
    throw new Error(`http.app ${where} is not a Hono app`);
  }
  const { Hono } = await projectImport(base, "hono");
  const mounted = new Hono();
  mounted.use(async (c, next) => {
    if (c.env?.auth) c.set("auth", c.env.auth);
    await next();
  });
  mounted.route("/", app);
  return { app, mounted };
}

// The app's routes as the api matches them (Starlette's syntax: `{name}`, a mount's `prefix`), and
// its middleware (a handler of every method on every path below `/`, which the official server
// would run before its own routes too).
function inventory(app) {
  const routes = [];
  const middleware = [];
  for (const { method, path: route, handler } of app.routes) {
    if (method === "ALL" && /^\/?\*$/.test(route)) {
      middleware.push(handler.name || "middleware");
      continue;
    }
    const wildcard = route.endsWith("/*") || route.endsWith("*");
    const prefix = wildcard ? route.replace(/\/?\*$/, "") || "/" : null;
    const pattern = (prefix ?? route).replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?\??/g, "{$1}");
    routes.push({ path: pattern, methods: method === "ALL" ? null : [method], prefix: wildcard });
  }
  return { routes, middleware };
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

// The request the api was sent, as a fetch `Request` (what the official server's handlers get).
function requestOf(message) {
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
  const body = message.body ? Buffer.from(message.body, "base64") : null;
  const bodiless = ["GET", "HEAD"].includes(message.method) || !body?.length;
  return new Request(url, { method: message.method, headers, body: bodiless ? undefined : body });
}

async function authenticate(handlers, message) {
  return normalized(await handlers.authenticate(requestOf(message)));
}

async function serve(app, message, send) {
  const request = requestOf(message);
  const auth = message.user ? { user: message.user, scopes: message.permissions ?? [] } : undefined;
  let started = false;
  try {
    const response = await app.fetch(request, { auth });
    send({ id: message.id, start: { status: response.status, headers: [...response.headers.entries()] } });
    started = true;
    if (response.body) {
      for await (const chunk of response.body) {
        send({ id: message.id, chunk: Buffer.from(chunk).toString("base64") });
      }
    }
  } catch (err) {
    // The app's bug: a 500 with a correlation id, or an answer cut where it failed.
    console.error(`mostrador: the project's route failed: ${err?.stack ?? err}`);
    if (!started) {
      send({ id: message.id, error: { status: 500, detail: String(err), headers: {}, bug: true } });
      return;
    }
  }
  send({ id: message.id, end: true });
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

const configPath = process.argv[2];
const { base } = loadConfig(configPath);
const { auth: authConfig, http } = JSON.parse(readFileSync(configPath, "utf8"));
const handlers = authConfig?.path ? await loadAuth(base, authConfig.path) : {};
const app = http?.app ? await loadApp(base, http.app) : null;
// The api asks a callback only for what one is registered for: `threads:create` is
// (threads, create), `threads` (threads, *), `*:create` (*, create), `*` (*, *).
const registered = Object.keys(handlers.callbacks ?? {}).map((key) => {
  const [resource, action] = key.split(":", 2);
  return [resource, action ?? "*"];
});
send({
  t: "ready",
  pid: process.pid,
  authenticate: typeof handlers.authenticate === "function",
  handlers: registered,
  ...(app ? inventory(app.app) : {}),
});

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  const message = JSON.parse(line);
  if (message.t === "http") {
    serve(app.mounted, message, send);
    return;
  }
  const answer = message.t === "authenticate" ? authenticate(handlers, message) : authorize(handlers, message);
  answer.then(
    (result) => send({ id: message.id, ...result }),
    (err) => send({ id: message.id, error: refusal(err) }),
  );
});
// The api is gone: nothing left to answer.
lines.on("close", () => process.exit(0));
