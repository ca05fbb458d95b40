// The runner's side of the protocol with its worker (`worker/src/runner/protocol.rs`): one JSON
// object per line, read on standard input, written on the protocol's own descriptor. The runs of
// the process share it; each message of a run carries its number (`run`).

import { writeSync } from "node:fs";
import { createInterface } from "node:readline";

import { dumps } from "./json.mjs";

// The protocol's version, which the runner says it speaks when it is ready.
export const VERSION = 2;

// The worker could not execute a saver operation (the database failed).
export class SaverFailed extends Error {
  constructor(message) {
    super(message);
    this.name = "SaverFailed";
  }
}

export class Channel {
  // `out`: the descriptor the protocol is written on (what the graphs print goes elsewhere).
  constructor(out) {
    this.out = out;
    this.nextId = 0;
    this.waiting = new Map();
    this.pending = [];
    this.onMessage = () => {};
  }

  // Lines sent in one turn of the event loop are written together: a superstep sends several
  // messages (writes, events, a checkpoint), and each write is a system call. What must not wait
  // for the turn's end (a checkpoint's description, before a node that may block the loop) is
  // written at once by `flush`.
  send(message) {
    this.pending.push(dumps(message) + "\n");
    if (this.pending.length === 1) setImmediate(() => this.flush());
  }

  flush() {
    const text = this.pending.join("");
    this.pending = [];
    if (text) writeAll(this.out, Buffer.from(text));
  }

  call(message) {
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.send({ ...message, id });
    });
  }

  // Reads the worker's lines until it goes away, which ends the process: nothing it does could
  // be recorded any more.
  read(input) {
    const lines = createInterface({ input, crlfDelay: Infinity });
    lines.on("line", (line) => {
      if (!line) return;
      const message = JSON.parse(line);
      if (message.t === "reply") {
        const waiting = this.waiting.get(message.id);
        if (waiting === undefined) return;
        this.waiting.delete(message.id);
        // A lost lease gets no reply: the worker stops the run.
        if (message.error == null) waiting.resolve(message.result);
        else waiting.reject(new SaverFailed(message.error));
      } else {
        this.onMessage(message);
      }
    });
    lines.on("close", () => process.exit(0));
  }
}

function writeAll(fd, buffer) {
  let written = 0;
  while (written < buffer.length) {
    try {
      written += writeSync(fd, buffer, written);
    } catch (err) {
      // The pipe is full (the descriptor is non-blocking when the worker made it so): wait.
      if (err.code !== "EAGAIN") throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
}

// One run's messages: the process's channel, each message marked with the run's number.
export class RunChannel {
  constructor(channel, run) {
    this.channel = channel;
    this.run = run;
  }

  send(message) {
    this.channel.send({ ...message, run: this.run });
  }

  // An operation that needs no answer.
  cast(op, args) {
    this.send({ t: "cast", cast: { op, ...args } });
  }

  call(op, args) {
    return this.channel.call({ t: "call", run: this.run, call: { op, ...args } });
  }

  emit(event, data) {
    this.send({ t: "event", event, data });
  }

  // Writes what was sent so far, now.
  flush() {
    this.channel.flush();
  }
}
