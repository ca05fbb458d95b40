// The graphs of the Python benches, in TypeScript as LangGraph.js's documentation writes a graph:
// `linear6` and `linear1` (bench/servers/linear.py: n1 -> ... -> nN, each appending its name to
// `path`), and `l1` and `l6` (the peers' e2e/graphs.py: each node waits the input's `delay_ms`,
// as a model call would, then appends its name to `log`).
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

function line<S extends ReturnType<typeof Annotation.Root>>(state: S, steps: number, node: (name: string) => any) {
  const builder = new StateGraph(state);
  const names = Array.from({ length: steps }, (_, i) => `n${i + 1}`);
  for (const name of names) builder.addNode(name, node(name));
  builder.addEdge(START, names[0] as never);
  for (let i = 1; i < names.length; i++) builder.addEdge(names[i - 1] as never, names[i] as never);
  builder.addEdge(names[names.length - 1] as never, END);
  return builder.compile();
}

const Path = Annotation.Root({
  path: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

export const linear6 = line(Path, 6, (name) => async () => ({ path: [name] }));
export const linear1 = line(Path, 1, (name) => async () => ({ path: [name] }));

const Waiting = Annotation.Root({
  log: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  delay_ms: Annotation<number>,
});

const waiting = (name: string) => async (state: typeof Waiting.State) => {
  if (state.delay_ms) await new Promise((resolve) => setTimeout(resolve, state.delay_ms));
  return { log: [name] };
};

export const l1 = line(Waiting, 1, waiting);
export const l6 = line(Waiting, 6, waiting);
