// Graphs described for the api: their drawings and subgraphs, as the official server answers
// `assistants.get_graph` and `get_subgraphs`. Their schemas are not derived yet (the official JS
// server reads them from the TypeScript source): the api answers them empty.

import { jsonable } from "./json.mjs";

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
  const value = project.values[graphId];
  const graph = await project.graph(graphId, { configurable: {} }, { access: "assistants.read" });
  const name = typeof value !== "function" && graph.name && graph.name !== "LangGraph" ? graph.name : graphId;
  const subgraphs = {};
  for await (const [ns] of graph.getSubgraphsAsync(undefined, true)) subgraphs[ns] = noSchemas();
  const depth = Math.max(0, ...Object.keys(subgraphs).map((ns) => ns.split("|").length));
  const drawings = { false: await drawing(graph, false) };
  for (let level = 1; level < depth; level++) drawings[String(level)] = await drawing(graph, level);
  drawings.true = await drawing(graph, true);
  return { name, schemas: noSchemas(), graph: drawings, subgraphs };
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
