// Semantic memory, as LangGraph.js's memory how-to writes it: memories put in the store, then
// searched with a query, nearest first, under the project's `store.index`.
import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph } from "@langchain/langgraph";

const State = Annotation.Root({
  query: Annotation<string>,
  recalled: Annotation<string[]>,
});

async function recall(state: typeof State.State, config: LangGraphRunnableConfig) {
  const store = config.store!;
  const namespace = ["memories", "ana"];
  await store.put(namespace, "tea", { text: "likes green tea" });
  await store.put(namespace, "city", { text: "lives in Madrid" });
  await store.put(namespace, "music", { text: "plays the guitar" });
  const found = await store.search(namespace, { query: state.query, limit: 2 });
  return { recalled: found.map((item) => `${item.key}:${item.score != null}`) };
}

export const graph = new StateGraph(State)
  .addNode("recall", recall)
  .addEdge(START, "recall")
  .addEdge("recall", END)
  .compile();
