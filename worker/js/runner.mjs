// mostrador's JavaScript runner for a worker: `node runner.mjs <langgraph.json>` loads the
// project's JavaScript graphs with its own LangGraph.js, then executes the runs the worker
// starts, many at once, each a task of the event loop, over the protocol the Python runner
// speaks (`channel.mjs`).

import { openSync } from "node:fs";

import { Channel, RunChannel, VERSION } from "./channel.mjs";
import { describeAll } from "./describe.mjs";
import { Project } from "./project.mjs";
import { Run, runOne, waiterClass } from "./run.mjs";
import { saverClass } from "./saver.mjs";
import { spansClass } from "./spans.mjs";
import { storeClass } from "./store.mjs";
import { watchTheLoop } from "./watch.mjs";

// Before any user code runs: what the graphs print goes to standard error, never into the
// protocol, which keeps standard output's descriptor (a copy, opened before).
const protocolOut = openSync("/dev/stdout", "w");
process.stdout.write = process.stderr.write.bind(process.stderr);

// The worker's settings for this runner are its own, not the graphs' (a memory limit is Node's
// heap flag).
const blockedAfter = Number(process.env.MOSTRADOR_RUNNER_BLOCKED_AFTER || 0);
// The worker exports spans: runs send theirs (model and tool calls).
const spans = Boolean(process.env.MOSTRADOR_RUNNER_SPANS);
for (const name of Object.keys(process.env)) {
  if (name.startsWith("MOSTRADOR_RUNNER_")) delete process.env[name];
}

const project = await Project.load(process.argv[2]);
const channel = new Channel(protocolOut);
const watch = blockedAfter > 0 ? watchTheLoop(protocolOut, blockedAfter) : null;
const classes = {
  Saver: saverClass(project.checkpoint),
  Store: storeClass(project.checkpoint.BaseStore),
  Waiter: waiterClass(project.callbacks.BaseCallbackHandler, (run) => watch?.running(run)),
  Spans: spans ? spansClass(project.callbacks.BaseCallbackHandler) : null,
};
const runs = new Map();

channel.onMessage = (message) => {
  const number = message.run;
  if (message.t === "start") {
    const run = new Run(new RunChannel(channel, number), project, message.spec, classes);
    runs.set(number, run);
    runOne(run).finally(() => runs.delete(number));
  } else if (message.t === "drain") {
    runs.get(number)?.control.requestDrain(message.reason || "shutdown");
  } else if (message.t === "cancel") {
    runs.get(number)?.abort.abort();
  } else if (message.t === "describe") {
    describeAll(channel, project, { types: message.types === true }).catch((err) => {
      console.error(err);
      process.exit(1);
    });
  }
  // A drain or cancel of a run that has ended concerns nothing.
};

// A rejection no run awaited (a graph's stray promise) is printed, not the end of every run.
process.on("unhandledRejection", (err) => console.error("mostrador runner: unhandled rejection", err));

channel.read(process.stdin);
channel.send({ t: "ready", protocol: VERSION, pid: process.pid, graphs: project.ids() });
