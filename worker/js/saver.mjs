// LangGraph's checkpointer, executed by the worker in mostrador's Postgres tables: every write is
// fenced by the run's lease in the same statement. The checkpoints the run saves are also kept
// here, so that describing them reads nothing back.

import { jsonable } from "./json.mjs";

const UNREAD = Symbol("unread");
const EXCLUDED_METADATA = ["checkpoint_ns", "checkpoint_id", "run_id", "thread_id"];

const b64 = (bytes) => Buffer.from(bytes ?? new Uint8Array()).toString("base64");
const unb64 = (text) => new Uint8Array(Buffer.from(text ?? "", "base64"));

// The saver's class, made from the project's own LangGraph (`checkpoint`: its
// `@langchain/langgraph-checkpoint`).
export function saverClass(checkpoint) {
  const { BaseCheckpointSaver, WRITES_IDX_MAP, copyCheckpoint } = checkpoint;

  // A kept checkpoint as a read from the database gives it: the caller's to change.
  const ownCopy = (found) =>
    found == null
      ? undefined
      : { ...found, checkpoint: copyCheckpoint(found.checkpoint), pendingWrites: [...(found.pendingWrites ?? [])] };

  return class MostradorSaver extends BaseCheckpointSaver {
    constructor(channel, threadId) {
      super();
      this.channel = channel;
      this.threadId = threadId;
      // (ns, checkpoint id) → the tuple this run saved, in the order saved.
      this.saved = new Map();
      // The thread's latest checkpoint as the worker read it with the run.
      this.latest = UNREAD;
      // Told of each new checkpoint of the thread before it is saved.
      this.saving = null;
    }

    configOf(ns, checkpointId) {
      return { configurable: { thread_id: this.threadId, checkpoint_ns: ns, checkpoint_id: checkpointId } };
    }

    async getTuple(config) {
      const ns = config.configurable?.checkpoint_ns ?? "";
      const checkpointId = config.configurable?.checkpoint_id;
      const key = `${ns}\u0000${checkpointId}`;
      if (checkpointId && this.saved.has(key)) return ownCopy(this.saved.get(key));
      const rootLatest = ns === "" && !checkpointId;
      if (rootLatest) {
        // Only this run writes to the thread: its newest checkpoint is the thread's latest.
        const own = [...this.saved.entries()].filter(([k]) => k.startsWith("\u0000"));
        if (own.length) return ownCopy(own[own.length - 1][1]);
        if (this.latest !== UNREAD) return ownCopy(this.latest);
      }
      const found = await this.channel.call("get", { ns, checkpoint_id: checkpointId ?? null });
      const tuple = found ? await this.tupleOf(found) : undefined;
      if (rootLatest && this.saved.size === 0) this.latest = ownCopy(tuple);
      return tuple;
    }

    async *list(config, options = {}) {
      const ns = config?.configurable?.checkpoint_ns ?? "";
      const before = options.before?.configurable?.checkpoint_id ?? null;
      const listed = await this.channel.call("list", { ns, before, limit: options.limit ?? 1000 });
      for (const found of listed) {
        const tuple = await this.tupleOf(found);
        const filter = options.filter ?? {};
        if (Object.entries(filter).every(([k, v]) => tuple.metadata?.[k] === v)) yield tuple;
      }
    }

    async tupleOf(found) {
      const values = {};
      for (const blob of found.blobs) {
        if (blob.type !== "empty") values[blob.channel] = await this.serde.loadsTyped(blob.type, unb64(blob.bytes));
      }
      const pendingWrites = [];
      for (const write of found.writes) {
        pendingWrites.push([write.task_id, write.channel, await this.serde.loadsTyped(write.type, unb64(write.bytes))]);
      }
      const parent = found.parent_checkpoint_id;
      return {
        config: this.configOf(found.ns, found.checkpoint_id),
        checkpoint: { ...found.saved, channel_values: values },
        metadata: found.metadata,
        parentConfig: parent ? this.configOf(found.ns, parent) : undefined,
        pendingWrites,
      };
    }

    async put(config, checkpoint, metadata, newVersions) {
      const ns = config.configurable?.checkpoint_ns ?? "";
      const parentId = config.configurable?.checkpoint_id ?? null;
      const { channel_values: values = {}, ...saved } = checkpoint;
      const blobs = [];
      // The checkpoint as a read from the database gives it back (LangChain's messages revived
      // as their constructors complete them), which is what describing it must show.
      const revived = { ...values };
      for (const [channel, version] of Object.entries(newVersions)) {
        const [type, bytes] = channel in values ? await this.serde.dumpsTyped(values[channel]) : ["empty", null];
        blobs.push({ channel, version, type, bytes: b64(bytes) });
        if (channel in values) revived[channel] = await this.serde.loadsTyped(type, bytes);
      }
      // The official server's checkpointer puts the thread back into a checkpoint's metadata,
      // and clients filter history by it.
      // As the official JS server's, the run's configurable (but the checkpointer's own keys)
      // and metadata join LangGraph's: a run finds the checkpoints it saved by their `run_id`.
      const configurable = Object.entries(config.configurable ?? {}).filter(
        ([key]) => !key.startsWith("__") && !EXCLUDED_METADATA.includes(key),
      );
      const stored = jsonable({
        ...Object.fromEntries(configurable),
        ...config.metadata,
        ...metadata,
      });
      stored.thread_id ??= this.threadId;
      if (ns === "" && this.saving !== null) this.saving(checkpoint.id, metadata?.source);
      const put = {
        ns,
        checkpoint_id: checkpoint.id,
        parent_checkpoint_id: parentId,
        saved,
        metadata: stored,
        blobs,
      };
      // The input's checkpoint: no node runs before the next checkpoint, which the worker writes
      // after it (in one transaction) and whose answer says both are saved.
      if (metadata?.source === "input") this.channel.cast("put", put);
      else await this.channel.call("put", put);
      const savedConfig = this.configOf(ns, checkpoint.id);
      this.saved.set(`${ns}\u0000${checkpoint.id}`, {
        config: savedConfig,
        checkpoint: { ...checkpoint, channel_values: revived },
        metadata: stored,
        parentConfig: parentId ? this.configOf(ns, parentId) : undefined,
        pendingWrites: [],
      });
      return savedConfig;
    }

    async putWrites(config, writes, taskId, taskPath = "") {
      const ns = config.configurable?.checkpoint_ns ?? "";
      const checkpointId = config.configurable?.checkpoint_id;
      const rows = [];
      for (const [idx, [channel, value]] of writes.entries()) {
        const [type, bytes] = await this.serde.dumpsTyped(value);
        rows.push({ task_id: taskId, task_path: taskPath, idx: WRITES_IDX_MAP[channel] ?? idx, channel, type, bytes: b64(bytes) });
      }
      // The worker writes them before the next checkpoint, which it reads after.
      this.channel.cast("put_writes", { ns, checkpoint_id: checkpointId, writes: rows });
      const key = `${ns}\u0000${checkpointId}`;
      const cached = this.saved.get(key);
      if (cached !== undefined) {
        const special = (channel) => channel in WRITES_IDX_MAP;
        const kept = cached.pendingWrites.filter(
          ([task, channel]) => !(task === taskId && special(channel) && writes.some(([c]) => c === channel)),
        );
        const known = new Set(kept.map(([task, channel]) => `${task}\u0000${channel}`));
        const added = writes
          .filter(([channel]) => special(channel) || !known.has(`${taskId}\u0000${channel}`))
          .map(([channel, value]) => [taskId, channel, value]);
        this.saved.set(key, { ...cached, pendingWrites: [...kept, ...added] });
      }
    }

    // Integers, never one a branch of the thread already used: a run from a past checkpoint
    // bumps versions from that checkpoint's, so a version is at least the clock in microseconds.
    getNextVersion(current) {
      const base = typeof current === "string" ? Number.parseInt(current, 10) : (current ?? 0);
      return Math.max(base + 1, Date.now() * 1000);
    }

    async deleteThread() {
      throw new Error("a thread is deleted through the api, not by a run");
    }
  };
}
