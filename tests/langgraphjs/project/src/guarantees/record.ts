// What the guarantees' graphs share (tests/python/guarantees/graphs/record.py, for JavaScript):
// every node records its starts and finishes, with the runner process that ran it and that
// runner's worker, and a node can wait for a gate the driver opens, so that the driver kills,
// drains or cancels while the node is in flight without sleeping. The driver passes the folder
// of the records and gates in `GUARANTEES_DIR`, which runners inherit from their worker.
import { appendFileSync, existsSync } from "node:fs";
import path from "node:path";

import type { LangGraphRunnableConfig } from "@langchain/langgraph";

// Long enough for any test; a gate never opened fails the node rather than hanging a runner.
const GATE_TIMEOUT_MS = 120_000;

const dir = () => process.env.GUARANTEES_DIR ?? ".";
const threadOf = (config: LangGraphRunnableConfig) => String(config.configurable?.thread_id);

// One line per start or finish; appends of one short line are atomic (`O_APPEND`).
export function record(config: LangGraphRunnableConfig, node: string, phase: "start" | "finish") {
  const line = JSON.stringify({
    thread_id: threadOf(config),
    node,
    phase,
    runner: process.pid,
    worker: process.ppid,
    forked: false,
    attempt: config.metadata?.run_attempt ?? null,
  });
  appendFileSync(path.join(dir(), "executions.jsonl"), line + "\n");
}

// Returns once the driver opened the thread's gate (or `opened()` holds).
export async function waitForGate(config: LangGraphRunnableConfig, opened: () => boolean = () => false) {
  const gate = path.join(dir(), "gates", threadOf(config));
  const deadline = Date.now() + GATE_TIMEOUT_MS;
  while (!(existsSync(gate) || opened())) {
    if (Date.now() > deadline) throw new Error(`the gate ${gate} was never opened`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
