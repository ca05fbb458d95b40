// `first`, then a node blocked for ten minutes, then `last`; the input's `mode` picks how it
// blocks: `sleep_async` (awaiting a timer) or `block_loop` (a synchronous loop: the runner's event
// loop itself is blocked, so only killing its process stops it).
import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph } from "@langchain/langgraph";

import { record } from "./record.js";

const BLOCKED_MS = 600_000;

const State = Annotation.Root({
  mode: Annotation<string>,
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

async function first(_: typeof State.State, config: LangGraphRunnableConfig) {
  record(config, "first", "start");
  record(config, "first", "finish");
  return { log: ["first"] };
}

async function sleepAsync(_: typeof State.State, config: LangGraphRunnableConfig) {
  record(config, "sleep_async", "start");
  await new Promise((resolve) => setTimeout(resolve, BLOCKED_MS));
  record(config, "sleep_async", "finish");
  return { log: ["sleep_async"] };
}

async function blockLoop(_: typeof State.State, config: LangGraphRunnableConfig) {
  record(config, "block_loop", "start");
  const until = Date.now() + BLOCKED_MS;
  while (Date.now() < until) {
    // The point: nothing else of this process runs.
  }
  record(config, "block_loop", "finish");
  return { log: ["block_loop"] };
}

async function last(_: typeof State.State, config: LangGraphRunnableConfig) {
  record(config, "last", "start");
  record(config, "last", "finish");
  return { log: ["last"] };
}

export const graph = new StateGraph(State)
  .addNode("first", first)
  .addNode("sleep_async", sleepAsync)
  .addNode("block_loop", blockLoop)
  .addNode("last", last)
  .addEdge(START, "first")
  .addConditionalEdges("first", (state) => state.mode, ["sleep_async", "block_loop"])
  .addEdge("sleep_async", "last")
  .addEdge("block_loop", "last")
  .addEdge("last", END)
  .compile();
