// A thread that tells the worker when a run has blocked this process's event loop for
// `blockedAfter` seconds (a synchronous loop or call in a node): every run of the process waits
// for it, so the worker ends that run and replaces the process. The run is the one whose task
// started last (`running`), which is the one holding the loop: a blocked loop starts nothing.

import { Worker } from "node:worker_threads";

// The watcher: it cannot run on the event loop it watches.
const WATCHER = `
const { workerData } = require("node:worker_threads");
const { writeSync } = require("node:fs");
const beat = new Float64Array(workerData.shared, 0, 1);
const current = new Int32Array(workerData.shared, 8, 1);
const pause = new Int32Array(new SharedArrayBuffer(4));
let told;
for (;;) {
  Atomics.wait(pause, 0, 0, 100);
  const blocked = (Date.now() - beat[0]) / 1000;
  if (blocked < workerData.blockedAfter) {
    told = undefined;
    continue;
  }
  const run = Atomics.load(current, 0) || null;
  if (told === run) continue;
  told = run;
  const message = { t: "blocked", run, seconds: Math.round(blocked * 10) / 10 };
  writeSync(workerData.fd, JSON.stringify(message) + "\\n");
}
`;

export function watchTheLoop(fd, blockedAfter) {
  // The loop's last beat (ms), and the run whose task started last.
  const shared = new SharedArrayBuffer(16);
  const beat = new Float64Array(shared, 0, 1);
  const current = new Int32Array(shared, 8, 1);
  beat[0] = Date.now();
  setInterval(() => {
    beat[0] = Date.now();
  }, 100).unref();
  new Worker(WATCHER, { eval: true, workerData: { shared, fd, blockedAfter } }).unref();
  return {
    running(run) {
      Atomics.store(current, 0, run);
    },
  };
}
