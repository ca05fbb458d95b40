// Map-reduce with `Send`, as LangGraph.js's how-to writes it: one task per subject, their jokes
// gathered by a reducer, then the best one picked.
import { Annotation, END, Send, START, StateGraph } from "@langchain/langgraph";

const State = Annotation.Root({
  subjects: Annotation<string[]>,
  jokes: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  best: Annotation<string>,
});

const fanOut = (state: typeof State.State) =>
  state.subjects.map((subject) => new Send("joke", { subject }));

async function joke(state: { subject: string }) {
  return { jokes: [`a joke about ${state.subject}`] };
}

async function pick(state: typeof State.State) {
  return { best: [...state.jokes].sort()[0] };
}

export const graph = new StateGraph(State)
  .addNode("joke", joke)
  .addNode("pick", pick)
  .addConditionalEdges(START, fanOut, ["joke"])
  .addEdge("joke", "pick")
  .addEdge("pick", END)
  .compile();
