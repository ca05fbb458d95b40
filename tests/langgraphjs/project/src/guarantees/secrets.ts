// One node that reports what its runner process can see of the platform: its own environment,
// and whether it can read its worker's (`/proc/<worker>/environ`, `/proc/<worker>/mem`; the
// worker's pid comes in the input), as code that no one reviewed would try.
import { readFileSync } from "node:fs";

import { Annotation, END, START, StateGraph } from "@langchain/langgraph";

const State = Annotation.Root({
  worker: Annotation<number>,
  seen: Annotation<Record<string, unknown>>,
});

function look(file: string): string {
  try {
    return "read: " + readFileSync(file).subarray(0, 4096).toString();
  } catch (err) {
    return `refused: ${(err as NodeJS.ErrnoException).code ?? err}`;
  }
}

async function probe(state: typeof State.State) {
  return {
    seen: {
      environ: { ...process.env },
      worker_environ: look(`/proc/${state.worker}/environ`),
      worker_mem: look(`/proc/${state.worker}/mem`),
    },
  };
}

export const graph = new StateGraph(State)
  .addNode("probe", probe)
  .addEdge(START, "probe")
  .addEdge("probe", END)
  .compile();
