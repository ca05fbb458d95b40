// A parent graph with a subgraph as a node, its nodes writing custom stream events
// (`config.writer`), as LangGraph.js's streaming how-to writes them.
import { Annotation, END, type LangGraphRunnableConfig, START, StateGraph } from "@langchain/langgraph";

const State = Annotation.Root({
  topic: Annotation<string>,
  notes: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

async function research(state: typeof State.State, config: LangGraphRunnableConfig) {
  config.writer?.({ progress: `researching ${state.topic}` });
  return { notes: [`facts on ${state.topic}`] };
}

async function summarize(state: typeof State.State, config: LangGraphRunnableConfig) {
  config.writer?.({ progress: "summarizing" });
  return { notes: [`summary of ${state.notes.length} notes`] };
}

const child = new StateGraph(State)
  .addNode("research", research)
  .addNode("summarize", summarize)
  .addEdge(START, "research")
  .addEdge("research", "summarize")
  .addEdge("summarize", END)
  .compile();

async function plan(state: typeof State.State) {
  return { notes: [`plan for ${state.topic}`] };
}

export const graph = new StateGraph(State)
  .addNode("plan", plan)
  .addNode("child", child)
  .addEdge(START, "plan")
  .addEdge("plan", "child")
  .addEdge("child", END)
  .compile();
