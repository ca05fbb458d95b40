// A graph that remembers across threads with the store, as LangGraph.js's memory how-to writes
// it: the user's facts under their own namespace, searched and listed.
import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph } from "@langchain/langgraph";

const State = Annotation.Root({
  user: Annotation<string>,
  fact: Annotation<string>,
  known: Annotation<string[]>,
});

async function remember(state: typeof State.State, config: LangGraphRunnableConfig) {
  const store = config.store!;
  const namespace = ["memories", state.user];
  if (state.fact) await store.put(namespace, state.fact.replace(/\W+/g, "-"), { text: state.fact });
  const found = await store.search(namespace, { limit: 10 });
  const one = await store.get(namespace, "likes-tea");
  return {
    known: [...found.map((item) => String(item.value.text)).sort(), `tea: ${one?.value.text ?? "unknown"}`],
  };
}

export const graph = new StateGraph(State)
  .addNode("remember", remember)
  .addEdge(START, "remember")
  .addEdge("remember", END)
  .compile();
