// Six nodes in a line, `s1 -> ... -> s6`, each appending its name to `log`. The node named by the
// input's `hold` waits before it finishes: for a drain of its run (LangGraph.js's
// `config.control.drainRequested`, set when the worker relays SIGTERM) or for its thread's gate.
import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph } from "@langchain/langgraph";

import { record, waitForGate } from "./record.js";

const State = Annotation.Root({
  hold: Annotation<string>,
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

const node = (name: string) => async (state: typeof State.State, config: LangGraphRunnableConfig) => {
  record(config, name, "start");
  if (state.hold === name) await waitForGate(config, () => config.control?.drainRequested ?? false);
  record(config, name, "finish");
  return { log: [name] };
};

const names = ["s1", "s2", "s3", "s4", "s5", "s6"];
const builder = new StateGraph(State);
for (const name of names) builder.addNode(name, node(name));
builder.addEdge(START, "s1" as never);
for (let i = 1; i < names.length; i++) builder.addEdge(names[i - 1] as never, names[i] as never);
builder.addEdge("s6" as never, END);

export const graph = builder.compile();
