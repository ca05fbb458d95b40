// Human in the loop: a node asks with `interrupt()`, the client answers with `Command({resume})`.
import { Annotation, END, interrupt, START, StateGraph } from "@langchain/langgraph";

const State = Annotation.Root({
  request: Annotation<string>,
  steps: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  decision: Annotation<string>,
});

async function draft(state: typeof State.State) {
  return { steps: [`drafted ${state.request}`] };
}

async function approve(state: typeof State.State) {
  const decision = interrupt({ question: `approve ${state.request}?` });
  return { decision, steps: ["reviewed"] };
}

async function apply(state: typeof State.State) {
  return { steps: [state.decision === "yes" ? "applied" : "dropped"] };
}

export const graph = new StateGraph(State)
  .addNode("draft", draft)
  .addNode("approve", approve)
  .addNode("apply", apply)
  .addEdge(START, "draft")
  .addEdge("draft", "approve")
  .addEdge("approve", "apply")
  .addEdge("apply", END)
  .compile();
