// Graphs described for the api: their schemas, drawings and subgraphs, as the official JS server
// answers `assistants.get_schemas`, `get_graph` and `get_subgraphs`. A graph's schemas come from
// what it holds at run time, as the official server reads them first: a `StateSchema`, or Zod
// schemas (LangGraph's registry, else Zod's own). A graph whose state is an `Annotation` has no
// schema at run time; the official server then reads its TypeScript types from the source, which
// this runner does not: its schemas name the state's fields, each any JSON.

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

// The schemas of a compiled graph, as `assistants.get_schemas` answers them (a JS graph's config
// and context are one schema, as on the official JS server).
async function schemas(project, graph) {
  const builder = graph.builder;
  const found =
    (builder && (fromStateSchema(builder) ?? (await fromZod(project, graph)) ?? fromChannels(builder))) ?? null;
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

async function describe(project, graphId) {
  const graph = await project.graph(graphId, { configurable: {} }, { access: "assistants.read" });
  // The official JS server names a graph's assistant after the graph's id, whatever its `name`.
  const name = graphId;
  const subgraphs = {};
  for await (const [ns, subgraph] of graph.getSubgraphsAsync(undefined, true)) subgraphs[ns] = await schemas(project, subgraph);
  const depth = Math.max(0, ...Object.keys(subgraphs).map((ns) => ns.split("|").length));
  const drawings = { false: await drawing(graph, false) };
  for (let level = 1; level < depth; level++) drawings[String(level)] = await drawing(graph, level);
  drawings.true = await drawing(graph, true);
  return { name, schemas: await schemas(project, graph), graph: drawings, subgraphs };
}

export async function describeAll(channel, project) {
  const graphs = {};
  for (const graphId of project.ids()) {
    try {
      graphs[graphId] = await describe(project, graphId);
    } catch (err) {
      console.error(err);
      graphs[graphId] = { error: `${err?.name ?? "Error"}: ${err?.message ?? err}` };
    }
  }
  channel.send({ t: "described", graphs });
}
