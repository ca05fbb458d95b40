// A graph whose state is a `StateSchema` of Zod fields, as LangGraph.js's newest documentation
// declares state: the schema the server shows is the graph's own.
import { END, ReducedValue, START, StateGraph, StateSchema } from "@langchain/langgraph";
import { z } from "zod";

const State = new StateSchema({
  question: z.string().describe("What to research"),
  sources: new ReducedValue(z.array(z.string()).default(() => []), {
    inputSchema: z.array(z.string()),
    reducer: (current, next) => current.concat(next),
  }),
  answer: z.string().optional(),
});

export const graph = new StateGraph(State)
  .addNode("search", async (state) => ({ sources: [`notes on ${state.question}`] }))
  .addNode("write", async (state) => ({ answer: `${state.question}: ${state.sources.join("; ")}` }))
  .addEdge(START, "search")
  .addEdge("search", "write")
  .addEdge("write", END)
  .compile({ name: "Researcher" });
