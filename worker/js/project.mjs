// A project's `langgraph.json` and its JavaScript graphs, loaded as the official JS server loads
// them: the project's own `@langchain/langgraph` (from its `node_modules`), its TypeScript
// compiled by the project's `tsx` as the file is imported, a builder compiled once, a function
// called per run with the run's config.

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

export const JS_FILE = /\.(ts|mts|cts|tsx|js|mjs|cjs|jsx)$/;
const TS_FILE = /\.(ts|mts|cts|tsx)$/;

// The ES module of `name` as the project resolves it (not the CommonJS build: the graphs import
// the ES one, and their classes must be the same).
export async function projectImport(base, specifier) {
  const parts = specifier.split("/");
  const name = parts.slice(0, specifier.startsWith("@") ? 2 : 1).join("/");
  const subpath = ["."].concat(parts.slice(specifier.startsWith("@") ? 2 : 1)).join("/");
  const require = createRequire(path.join(base, "package.json"));
  let manifest;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch {
    // A package whose `exports` leave out its `package.json` (hono): where Node looks for it.
    const folders = require.resolve.paths(name) ?? [];
    manifest = folders.map((dir) => path.join(dir, name, "package.json")).find((file) => existsSync(file));
  }
  if (manifest == null) {
    throw new Error(`${name} is not installed in the project (${base}): run \`npm install\` there first`);
  }
  const pkg = JSON.parse(readFileSync(manifest, "utf8"));
  const exported = typeof pkg.exports === "object" ? pkg.exports[subpath] : undefined;
  let entry = exported?.import ?? exported ?? (subpath === "." ? (pkg.module ?? pkg.main ?? "index.js") : subpath);
  while (entry != null && typeof entry === "object") entry = entry.default ?? entry.import;
  return import(pathToFileURL(path.join(path.dirname(manifest), entry)).href);
}

// `KEY=VALUE` lines (`export` and quotes allowed, `#` comments), as dotenv reads them.
function envFile(file) {
  const found = {};
  for (let line of readFileSync(file, "utf8").split(/\r?\n/)) {
    line = line.trim();
    if (!line || line.startsWith("#")) continue;
    if (line.startsWith("export ")) line = line.slice(7).trim();
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    let value = line.slice(eq + 1).trim();
    const quote = value[0];
    if ((quote === '"' || quote === "'") && value.endsWith(quote) && value.length > 1) {
      value = value.slice(1, -1);
    } else {
      const comment = value.indexOf(" #");
      if (comment >= 0) value = value.slice(0, comment).trim();
    }
    found[key] = value;
  }
  return found;
}

// The project: its folder, its graphs' specs and its `env` applied to this process's
// environment (a missing env file is no error, as officially: a project as cloned ships
// `.env.example`).
export function loadConfig(configPath) {
  const config = JSON.parse(readFileSync(configPath, "utf8"));
  const base = path.dirname(path.resolve(configPath));
  const env = config.env;
  if (env != null && typeof env === "object") {
    for (const [key, value] of Object.entries(env)) process.env[key] = String(value);
  } else if (typeof env === "string") {
    const file = path.join(base, env);
    if (existsSync(file)) {
      for (const [key, value] of Object.entries(envFile(file))) {
        if (process.env[key] === undefined) process.env[key] = value;
      }
    } else {
      console.error(`mostrador runner: no env file ${file}: the graphs start without it`);
    }
  }
  const specs = {};
  for (const [id, spec] of Object.entries(config.graphs ?? {})) {
    const where = typeof spec === "string" ? spec : spec?.path;
    const [file] = String(where).split(":");
    if (JS_FILE.test(file)) specs[id] = where;
  }
  return { base, specs };
}

// TypeScript graphs are compiled as they are imported, by the project's `tsx` (as the official
// JS server does with its own), or by Node itself where it strips types.
export async function registerTypeScript(base) {
  try {
    const { register } = await projectImport(base, "tsx/esm/api");
    register();
    return;
  } catch (err) {
    if (process.features?.typescript) return;
    throw new Error(
      `TypeScript graphs need tsx in the project (npm install --save-dev tsx) or Node.js 22.18 ` +
        `or later: ${err.message}`,
    );
  }
}

const isBuilder = (value) =>
  value != null && typeof value === "object" && typeof value.compile === "function";

const isCompiled = (value) =>
  value != null && typeof value === "object" && value.builder != null && typeof value.builder === "object";

// What a graph's export resolves to: a builder compiled; a `createAgent` wrapper unwrapped to
// its compiled graph.
function compiled(value) {
  const graph = isBuilder(value) ? value.compile() : value;
  const inner = graph?.graph;
  return inner != null && typeof inner === "object" && isCompiled(inner) ? inner : graph;
}

export class Project {
  constructor(config, langgraph, checkpoint) {
    this.base = config.base;
    this.specs = config.specs;
    this.langgraph = langgraph;
    this.checkpoint = checkpoint;
    this.values = {};
  }

  static async load(configPath) {
    const config = loadConfig(configPath);
    if (Object.values(config.specs).some((spec) => TS_FILE.test(spec.split(":")[0]))) {
      await registerTypeScript(config.base);
    }
    const langgraph = await projectImport(config.base, "@langchain/langgraph");
    const require = createRequire(path.join(config.base, "package.json"));
    const version = JSON.parse(readFileSync(require.resolve("@langchain/langgraph/package.json"), "utf8")).version;
    // The checkpointer's base class, as the project's LangGraph has it.
    // LangGraph's own dependencies, as it resolves them.
    const langgraphDir = path.dirname(require.resolve("@langchain/langgraph/package.json"));
    const checkpoint = await projectImport(langgraphDir, "@langchain/langgraph-checkpoint");
    const project = new Project(config, langgraph, checkpoint);
    project.version = version;
    project.langgraphDir = langgraphDir;
    project.callbacks = await projectImport(langgraphDir, "@langchain/core/callbacks/base");
    for (const [id, spec] of Object.entries(config.specs)) {
      const [file, name] = spec.split(":", 2);
      const module = await import(pathToFileURL(path.resolve(config.base, file)).href);
      const value = await module[name || "default"];
      if (value == null) throw new Error(`graph ${id}: ${file} exports no ${name || "default"}`);
      project.values[id] = typeof value === "function" ? value : compiled(value);
    }
    return project;
  }

  ids() {
    return Object.keys(this.specs);
  }

  // The graph `id` for a run: a function (a factory) is called with the run's config and the
  // runtime, as officially.
  async graph(id, config, runtime) {
    const value = this.values[id];
    if (value === undefined) throw new Error(`no graph ${id}`);
    if (typeof value === "function") return compiled(await value(config, runtime));
    return value;
  }
}
