// One superstep of two parallel tasks, then `join`: `fast` returns at once (LangGraph.js saves its
// pending write while `slow` runs); `slow` waits for its thread's gate. As in the Python graph, the
// tasks write the channels `fast` and `slow`; LangGraph.js names no node after a channel, so the
// nodes are `fast_task` and `slow_task`, recorded as `fast` and `slow`.
import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph } from "@langchain/langgraph";

import { record, waitForGate } from "./record.js";

const State = Annotation.Root({
  fast: Annotation<string>,
  slow: Annotation<string>,
  joined: Annotation<string>,
});

async function fast(_: typeof State.State, config: LangGraphRunnableConfig) {
  record(config, "fast", "start");
  record(config, "fast", "finish");
  return { fast: "fast done" };
}

async function slow(_: typeof State.State, config: LangGraphRunnableConfig) {
  record(config, "slow", "start");
  await waitForGate(config);
  record(config, "slow", "finish");
  return { slow: "slow done" };
}

async function join(state: typeof State.State, config: LangGraphRunnableConfig) {
  record(config, "join", "start");
  record(config, "join", "finish");
  return { joined: `${state.fast} + ${state.slow}` };
}

export const graph = new StateGraph(State)
  .addNode("fast_task", fast)
  .addNode("slow_task", slow)
  .addNode("join", join)
  .addEdge(START, "fast_task")
  .addEdge(START, "slow_task")
  .addEdge(["fast_task", "slow_task"], "join")
  .addEdge("join", END)
  .compile();
