// Graphs described for the api: their schemas, drawings and subgraphs, as the official JS server
// answers `assistants.get_schemas`, `get_graph` and `get_subgraphs`. A graph's schemas come from
// what it holds at run time, as the official server reads them first: a `StateSchema`, or Zod
// schemas (LangGraph's registry, else Zod's own). A graph whose state is an `Annotation` has no
// schema at run time; its TypeScript types are then read from the source by the official
// server's own parser when the project has it, else its schemas name the state's fields, each any
// JSON.

import path from "node:path";

import { jsonable } from "./json.mjs";
import { projectImport } from "./project.mjs";

const isStateSchema = (value) =>
  value != null &&
  typeof value === "object" &&
  typeof value.getJsonSchema === "function" &&
  typeof value.getInputJsonSchema === "function";

// The input takes the state's fields, none required, when the builder says so with this symbol.
const PARTIAL_STATE = Symbol.for("langgraph.state.partial");

function fromStateSchema(builder) {
  const state = builder._schemaRuntimeDefinition;
  const input = builder._inputRuntimeDefinition;
  const output = builder._outputRuntimeDefinition;
  if (![state, input, output].some(isStateSchema)) return null;
  let inputSchema = null;
  if (isStateSchema(input)) inputSchema = input.getInputJsonSchema();
  else if (input === PARTIAL_STATE && isStateSchema(state)) inputSchema = state.getInputJsonSchema();
  return {
    state: isStateSchema(state) ? state.getJsonSchema() : null,
    input: inputSchema,
    output: isStateSchema(output) ? output.getJsonSchema() : null,
    config: null,
  };
}

async function fromZod(project, graph) {
  const builder = graph.builder;
  try {
    const zod = await projectImport(project.langgraphDir, "@langchain/langgraph/zod/schema");
    const found = {
      state: zod.getUpdateTypeSchema(graph) ?? null,
      input: zod.getInputTypeSchema(graph) ?? null,
      output: zod.getOutputTypeSchema(graph) ?? null,
      config: zod.getConfigTypeSchema(graph) ?? null,
    };
    if (Object.values(found).some((schema) => schema !== null)) return found;
  } catch {
    // No registry: Zod's own conversion below.
  }
  try {
    const { toJsonSchema } = await projectImport(project.langgraphDir, "@langchain/core/utils/json_schema");
    const { isZodSchemaV3, isZodSchemaV4 } = await projectImport(project.langgraphDir, "@langchain/core/utils/types");
    const convert = (schema) => {
      if (schema == null || !(isZodSchemaV3(schema) || isZodSchemaV4(schema))) return null;
      try {
        return toJsonSchema(schema);
      } catch {
        return null;
      }
    };
    const state = convert(builder._schemaRuntimeDefinition);
    const input = convert(builder._inputRuntimeDefinition) ?? (state ? { ...state, required: undefined } : null);
    const found = { state, input, output: convert(builder._outputRuntimeDefinition), config: convert(builder._configRuntimeSchema) };
    if (Object.values(found).some((schema) => schema !== null)) return found;
  } catch {
    // No Zod schema.
  }
  return null;
}

// An `Annotation` state's fields, each any JSON: what is known of it at run time (the official
// server reads their TypeScript types from the source).
function fromChannels(builder) {
  const object = (definition) =>
    definition != null && typeof definition === "object"
      ? { type: "object", properties: Object.fromEntries(Object.keys(definition).map((key) => [key, {}])) }
      : null;
  const found = {
    state: object(builder._schemaDefinition),
    input: object(builder._inputDefinition),
    output: object(builder._outputDefinition),
    config: null,
  };
  return found.state === null ? null : found;
}

// The schemas of the graphs whose state is an `Annotation` (no schema at run time, theirs or a
// subgraph's), read from their TypeScript source by the official JS server's own parser
// (`@langchain/langgraph-api/schema`, which the official CLI installs in the project), as that
// server reads them: by graph id, a function of a namespace (`""`: the graph's own). All graphs
// are read in one program (a few seconds; one by one would take that per graph). None when the
// project has no such parser or it fails: the state's fields are then named, each any JSON.
async function fromSources(project) {
  const specs = {};
  for (const graphId of project.ids()) {
    try {
      const graph = await project.graph(graphId, { configurable: {} }, { access: "assistants.read" });
      const graphs = [graph];
      for await (const [, subgraph] of graph.getSubgraphsAsync(undefined, true)) graphs.push(subgraph);
      let untyped = false;
      for (const one of graphs) {
        if (one.builder && !fromStateSchema(one.builder) && !(await fromZod(project, one))) untyped = true;
      }
      if (!untyped) continue;
    } catch {
      continue; // describing it reports why
    }
    const [file, exportSymbol] = project.specs[graphId].split(":", 2);
    specs[graphId] = { sourceFile: path.resolve(project.base, file), exportSymbol };
  }
  if (Object.keys(specs).length === 0) return {};
  let parser;
  try {
    parser = await projectImport(project.base, "@langchain/langgraph-api/schema");
  } catch {
    return {};
  }
  let found;
  try {
    found = await parser.getStaticGraphSchema(specs, { timeoutMs: SOURCE_TIMEOUT_MS });
  } catch (err) {
    console.error(`mostrador runner: the graphs' TypeScript types were not read: ${err}`);
    return {};
  }
  const sources = {};
  for (const [graphId, schemas] of Object.entries(found ?? {})) {
    const root = Object.keys(schemas ?? {}).find((key) => !key.includes("|"));
    if (root === undefined) continue;
    sources[graphId] = (namespace) => (namespace ? schemas[`${root}|${namespace}`] : undefined) ?? schemas[root];
  }
  return sources;
}

// How long the official parser may read a graph's types, as the official server allows it.
const SOURCE_TIMEOUT_MS = 30_000;

// The schemas of a compiled graph, as `assistants.get_schemas` answers them (a JS graph's config
// and context are one schema, as on the official JS server); `source`, the schemas the official
// parser read from the graph's TypeScript (by namespace), for an `Annotation` state.
async function schemas(project, graph, source, namespace) {
  const builder = graph.builder;
  const fromTypes = () => {
    const found = source?.(namespace);
    return found == null ? null : { state: found.state, input: found.input, output: found.output, config: found.config };
  };
  const found =
    (builder &&
      (fromStateSchema(builder) ?? (await fromZod(project, graph)) ?? fromTypes() ?? fromChannels(builder))) ??
    null;
  if (found === null) return noSchemas();
  // A schema the graph does not have is left out, as the official JS server leaves it.
  return jsonable({
    input_schema: found.input ?? undefined,
    output_schema: found.output ?? undefined,
    state_schema: found.state ?? undefined,
    config_schema: found.config ?? undefined,
    context_schema: found.config ?? undefined,
  });
}

async function drawing(graph, xray) {
  try {
    return jsonable((await graph.getGraphAsync({ xray })).toJSON());
  } catch (err) {
    console.error(`mostrador runner: no drawing (xray ${xray}): ${err}`);
    return null;
  }
}

const noSchemas = () => ({
  input_schema: null,
  output_schema: null,
  state_schema: null,
  config_schema: null,
  context_schema: null,
});

async function describe(project, graphId, source) {
  const graph = await project.graph(graphId, { configurable: {} }, { access: "assistants.read" });
  // The official JS server names a graph's assistant after the graph's id, whatever its `name`.
  const name = graphId;
  const subgraphs = {};
  for await (const [ns, subgraph] of graph.getSubgraphsAsync(undefined, true)) {
    subgraphs[ns] = await schemas(project, subgraph, source, ns);
  }
  const depth = Math.max(0, ...Object.keys(subgraphs).map((ns) => ns.split("|").length));
  const drawings = { false: await drawing(graph, false) };
  for (let level = 1; level < depth; level++) drawings[String(level)] = await drawing(graph, level);
  drawings.true = await drawing(graph, true);
  return { name, schemas: await schemas(project, graph, source, ""), graph: drawings, subgraphs };
}

// Every graph described; with `types`, an `Annotation` state's TypeScript types read too.
export async function describeAll(channel, project, { types = false } = {}) {
  const sources = types ? await fromSources(project) : {};
  const graphs = {};
  for (const graphId of project.ids()) {
    try {
      graphs[graphId] = await describe(project, graphId, sources[graphId]);
    } catch (err) {
      console.error(err);
      graphs[graphId] = { error: `${err?.name ?? "Error"}: ${err?.message ?? err}` };
    }
  }
  channel.send({ t: "described", graphs });
}
