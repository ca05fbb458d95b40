// One run: LangGraph's stream, its events to the worker, its checkpoints described for the api.

import { SaverFailed } from "./channel.mjs";
import { jsonable } from "./json.mjs";

export const checkpointJson = (threadId, config) => {
  const configurable = config?.configurable;
  if (!configurable?.checkpoint_id) return null;
  const found = {
    checkpoint_id: configurable.checkpoint_id,
    thread_id: threadId,
    checkpoint_ns: configurable.checkpoint_ns ?? "",
  };
  if (configurable.checkpoint_map) found.checkpoint_map = configurable.checkpoint_map;
  return found;
};

const interruptJson = (interrupt) => ({ id: interrupt.id ?? null, value: interrupt.value ?? null });

const isSnapshot = (state) => state != null && typeof state === "object" && "values" in state && "next" in state;

// A state snapshot as the official server answers it (`ThreadState`).
export function threadState(threadId, state) {
  const tasks = (state.tasks ?? []).map((task) => ({
    id: task.id,
    name: task.name,
    path: task.path ?? [],
    error: task.error != null ? (task.error.message ?? String(task.error)) : null,
    interrupts: (task.interrupts ?? []).map(interruptJson),
    checkpoint: task.state != null && !isSnapshot(task.state) ? (task.state.configurable ?? null) : null,
    state: isSnapshot(task.state) ? threadState(threadId, task.state) : null,
    result: task.result ?? null,
  }));
  return jsonable({
    values: state.values,
    next: state.next,
    tasks,
    metadata: state.metadata ?? null,
    created_at: state.createdAt ?? null,
    checkpoint: checkpointJson(threadId, state.config),
    parent_checkpoint: checkpointJson(threadId, state.parentConfig),
    interrupts: tasks.flatMap((task) => task.interrupts),
    checkpoint_id: state.config?.configurable?.checkpoint_id ?? null,
    parent_checkpoint_id: state.parentConfig?.configurable?.checkpoint_id ?? null,
  });
}

// A config as the official JS server streams it: LangGraph's internal keys and callbacks left out.
function publicConfig(config) {
  if (config?.configurable == null || typeof config.configurable !== "object") return config;
  const { callbacks, ...rest } = config;
  const configurable = Object.entries(config.configurable).filter(([key]) => !key.startsWith("__"));
  return { ...rest, configurable: Object.fromEntries(configurable) };
}

const checkpointOf = (config, task = false) => {
  const configurable = config?.configurable;
  if (!configurable?.thread_id || (!task && !configurable.checkpoint_id)) return null;
  return {
    thread_id: configurable.thread_id,
    checkpoint_id: configurable.checkpoint_id ?? null,
    checkpoint_ns: configurable.checkpoint_ns || "",
    checkpoint_map: configurable.checkpoint_map || null,
  };
};

// A task of `debug` and `tasks`: a subgraph's state as the checkpoint it is at.
function streamedTask(task) {
  const checkpoint = checkpointOf(task.state, true);
  if (checkpoint === null) return task;
  const { state, ...rest } = task;
  return { ...rest, checkpoint };
}

// What LangGraph streams in `mode`, as the official JS server sends it.
function streamed(mode, data) {
  if (mode === "checkpoints") return { values: data.values, metadata: data.metadata, next: data.next };
  if (mode === "tasks") return streamedTask(data);
  if (mode === "debug" && data.type === "task_result") return { ...data, payload: streamedTask(data.payload) };
  if (mode === "debug" && data.type === "checkpoint") {
    const { parentConfig, ...payload } = data.payload;
    return {
      ...data,
      payload: {
        ...payload,
        checkpoint: checkpointOf(payload.config),
        parent_checkpoint: checkpointOf(parentConfig),
        tasks: payload.tasks.map(streamedTask),
        config: publicConfig(payload.config),
        parent_config: publicConfig(parentConfig),
      },
    };
  }
  return data;
}

// A command's `goto` as the SDKs send it: node names, or `{node, input}` for a Send.
function goto(value, Send) {
  if (value == null) return undefined;
  const items = Array.isArray(value) ? value : [value];
  return items.map((item) => (typeof item === "string" ? item : new Send(item.node, item.input)));
}

export class Run {
  constructor(channel, project, spec, classes) {
    this.channel = channel;
    this.project = project;
    this.spec = spec;
    this.threadId = spec.thread_id;
    const { RunControl } = project.langgraph;
    this.control = new RunControl();
    this.abort = new AbortController();
    this.saver = new classes.Saver(channel, this.threadId);
    this.saver.saving = (checkpointId, source) => this.saving(checkpointId, source);
    this.store = new classes.Store(channel);
    if (spec.latest != null) this.latestRead = spec.latest.checkpoint;
    // The newest checkpoint of the thread, not yet described: it is described when its tasks
    // have run (with their results), at the next checkpoint or at the run's end.
    this.undescribed = null;
    this.due = [];
    this.recording = Promise.resolve();
    this.inputCheckpoint = null;
    // The checkpoint saved last, until its `checkpoints` chunk has described it: the next step's
    // tasks wait for that (`classes.Waiter`), so a node that blocks the event loop cannot start
    // before the thread's state says where the run is.
    this.arrival = null;
    this.waiter = new classes.Waiter(this);
    this.spans = classes.Spans ? new classes.Spans(channel) : null;
  }

  // Resolves once the checkpoint saved last is described, or after `ms` at most.
  describedWithin(ms) {
    const arrival = this.arrival;
    if (arrival === null) return null;
    return Promise.race([arrival.described, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
  }

  config() {
    const spec = this.spec;
    const runConfig = spec.config ?? {};
    const configurable = {
      ...(runConfig.configurable ?? {}),
      thread_id: this.threadId,
      run_id: spec.run_id,
      graph_id: spec.graph_id,
      assistant_id: spec.assistant_id,
    };
    const metadata = {
      ...(spec.metadata ?? {}),
      run_id: spec.run_id,
      thread_id: this.threadId,
      graph_id: spec.graph_id,
      assistant_id: spec.assistant_id,
      run_attempt: spec.attempt,
      // As the official server's, the engine that ran it.
      langgraph_version: this.project.version,
    };
    const config = {
      configurable,
      metadata,
      recursionLimit: runConfig.recursion_limit ?? 25,
      tags: runConfig.tags ?? [],
    };
    if (runConfig.max_concurrency) config.maxConcurrency = runConfig.max_concurrency;
    return config;
  }

  async execute() {
    const spec = this.spec;
    if (this.latestRead !== undefined) {
      this.saver.latest = this.latestRead ? await this.saver.tupleOf(this.latestRead) : undefined;
    }
    const config = this.config();
    const update = spec.command?.update_state;
    const context = spec.context ?? {};
    const graph = await this.project.graph(spec.graph_id, config, {
      access: update != null ? "threads.update" : "threads.create_run",
      context,
      store: this.store,
    });
    this.graph = graph.withConfig({});
    this.graph.checkpointer = this.saver;
    this.graph.store = this.store;
    if (update != null) return this.updateState(update);
    return this.stream(config, context);
  }

  givenInput() {
    const command = this.spec.command;
    if (!command) return this.spec.input;
    const { Command, Send } = this.project.langgraph;
    const args = {};
    if ("resume" in command) args.resume = command.resume;
    if (command.update != null) args.update = command.update;
    const to = goto(command.goto, Send);
    if (to !== undefined) args.goto = to;
    return new Command(args);
  }

  async stream(config, context) {
    const spec = this.spec;
    const latest = await this.graph.getState(config);
    let input;
    if (latest.metadata?.run_id === spec.run_id) {
      // This run saved a checkpoint before (it was drained, or its worker died): go on.
      input = null;
      this.undescribed = latest.config.configurable.checkpoint_id;
    } else if (spec.checkpoint_id) {
      // From a past checkpoint (regenerate, edit, time travel): LangGraph forks there.
      config = { ...config, configurable: { ...config.configurable, checkpoint_id: spec.checkpoint_id } };
      input = this.givenInput();
    } else {
      input = this.givenInput();
    }
    const wanted = spec.stream_mode?.length ? spec.stream_mode : ["values"];
    // Checkpoints are described to the worker.
    const modes = new Set([...wanted.filter((mode) => mode !== "events"), "checkpoints"]);
    const options = {
      ...config,
      callbacks: this.spans ? [this.waiter, this.spans] : [this.waiter],
      streamMode: [...modes].sort(),
      subgraphs: true,
      signal: this.abort.signal,
      control: this.control,
      durability: spec.durability ?? "sync",
      context,
    };
    if (spec.interrupt_before) options.interruptBefore = spec.interrupt_before;
    if (spec.interrupt_after) options.interruptAfter = spec.interrupt_after;
    const subgraphs = Boolean(spec.stream_subgraphs);
    try {
      if (wanted.includes("events")) {
        if (spec.attempt === 1) options.runId = spec.run_id;
        const events = this.graph.streamEvents(input, { ...options, version: "v2" });
        for await (const event of events) {
          if (event.event === "on_chain_stream" && !event.parent_ids?.length) {
            const [ns, mode, data] = event.data.chunk;
            this.onChunk(ns, mode, data, wanted, subgraphs);
          } else if (!(event.tags ?? []).includes("langsmith:hidden")) {
            this.channel.emit("events", event);
          }
        }
      } else {
        for await (const [ns, mode, data] of await this.graph.stream(input, options)) {
          this.onChunk(ns, mode, data, wanted, subgraphs);
        }
      }
    } catch (err) {
      if (this.project.langgraph.isGraphDrained?.(err) || err?.name === "GraphDrained") {
        await this.describeLatest();
        return { kind: "drained", reason: this.control.drainReason ?? "shutdown" };
      }
      // Failed or cancelled: its last checkpoint is the thread's state.
      await this.describeLatest().catch(() => {});
      throw err;
    }
    let final = await this.describeLatest();
    if (final === null) final = { next: (await this.graph.getState(this.config())).next };
    return { kind: final.next.length ? "interrupted" : "success" };
  }

  // `threads.update_state`: the graph's own reducers apply the values as `as_node` wrote them,
  // in a new checkpoint. A refusal (an unknown node) is reported to the api and changes nothing.
  async updateState(update) {
    const spec = this.spec;
    const config = {
      configurable: { thread_id: this.threadId, graph_id: spec.graph_id, checkpoint_ns: "", run_id: spec.run_id },
    };
    const latest = await this.graph.getState(config);
    let applied;
    if (latest.metadata?.run_id === spec.run_id) {
      applied = latest.config;
    } else {
      const at = update.checkpoint_id
        ? { configurable: { ...config.configurable, checkpoint_id: update.checkpoint_id } }
        : config;
      try {
        applied = await this.graph.updateState(at, update.values, update.as_node ?? undefined);
      } catch (err) {
        if (err instanceof SaverFailed) throw err;
        this.channel.emit("update_state", { error: err?.name ?? "Error", message: String(err?.message ?? err) });
        return { kind: latest.next.length ? "interrupted" : "success" };
      }
    }
    this.undescribed = applied.configurable.checkpoint_id;
    const final = await this.describeLatest();
    this.channel.emit("update_state", checkpointJson(this.threadId, applied));
    return { kind: final !== null && final.next.length ? "interrupted" : "success" };
  }

  onChunk(ns, mode, data, wanted, subgraphs) {
    ns = ns ?? [];
    if (mode === "checkpoints" && ns.length === 0) {
      const checkpointId = data.config?.configurable?.checkpoint_id;
      if (checkpointId === this.undescribed) {
        this.channel.cast("describe", { checkpoint_id: checkpointId, snapshot: this.arrived(data) });
      }
      if (this.arrival?.checkpointId === checkpointId) {
        // Its description is written before the step's tasks start.
        this.channel.flush();
        this.arrival.resolve();
        this.arrival = null;
      }
    }
    if (ns.length && !subgraphs) return;
    const suffix = ns.length ? "|" + ns.join("|") : "";
    if (mode === "messages") {
      // Stored as `[message, metadata]`: the api unfolds them for clients of `messages`.
      if (wanted.includes("messages")) this.channel.emit("messages" + suffix, data);
    } else if (wanted.includes(mode)) {
      this.channel.emit(mode + suffix, streamed(mode, data));
    }
  }

  // A new checkpoint as LangGraph's `checkpoints` event tells it: the thread's state until the
  // checkpoint is described with the graph.
  arrived(data) {
    const state = {
      values: data.values,
      next: data.next ?? [],
      tasks: (data.tasks ?? []).map((task) => ({ ...task, path: [], state: task.state ?? undefined })),
      metadata: data.metadata,
      createdAt: this.saver.saved.get(`\u0000${data.config.configurable.checkpoint_id}`)?.checkpoint.ts,
      config: data.config,
      parentConfig: data.parentConfig,
    };
    return threadState(this.threadId, state);
  }

  // Describes a checkpoint of the thread for the api. `live`: the thread's latest, as LangGraph
  // shows the current state; otherwise as a record of its step, as history shows it.
  async describe(checkpointId, live) {
    const configurable = { ...this.config().configurable, checkpoint_ns: "" };
    if (!live) configurable.checkpoint_id = checkpointId;
    const state = await this.graph.getState({ configurable }, { subgraphs: true });
    const snapshot = threadState(this.threadId, state);
    this.channel.cast("describe", { checkpoint_id: checkpointId, snapshot });
    return snapshot;
  }

  // LangGraph saves a new checkpoint of the thread: the previous one's tasks have run, so it is
  // described now with their results. The input's checkpoint waits one more step.
  saving(checkpointId, source) {
    if (source === "input") this.inputCheckpoint = checkpointId;
    let resolve;
    const described = new Promise((done) => (resolve = done));
    this.arrival?.resolve();
    this.arrival = { checkpointId, described, resolve };
    if (this.undescribed !== null) this.due.push(this.undescribed);
    this.undescribed = checkpointId;
    if (this.due.length && !(this.due.length === 1 && this.due[0] === this.inputCheckpoint)) this.startRecording();
  }

  startRecording() {
    const due = this.due;
    this.due = [];
    this.recording = this.recording.then(async () => {
      for (const checkpointId of due) {
        try {
          await this.describe(checkpointId, false);
        } catch (err) {
          console.error(err);
        }
      }
    });
  }

  // At the run's end (or a drain, an error, an update): its last checkpoint, as the thread's
  // current state, after the records of the ones before it.
  async describeLatest() {
    if (this.due.length) this.startRecording();
    await this.recording;
    if (this.undescribed === null) return null;
    const checkpointId = this.undescribed;
    this.undescribed = null;
    return this.describe(checkpointId, true);
  }
}

// A LangChain callback handler, awaited, that holds a task's start while the checkpoint before it
// is not yet described (`Run.arrival`), and tells `running` which run starts a task (the one a
// blocked event loop is blamed on); made from the project's own `BaseCallbackHandler`.
export function waiterClass(BaseCallbackHandler, running) {
  return class Waiter extends BaseCallbackHandler {
    name = "mostrador_waiter";
    awaitHandlers = true;

    constructor(run) {
      super();
      this.run = run;
    }

    async handleChainStart() {
      running(this.run.channel.run);
      const waiting = this.run.describedWithin(100);
      if (waiting !== null) await waiting;
    }
  };
}

const failure = (error, message, retryable = false, retire = false) => ({ kind: "error", error, message, retryable, retire });

// Executes a run to its end and tells the worker how it ended.
export async function runOne(run) {
  let outcome;
  try {
    outcome = await run.execute();
  } catch (err) {
    if (run.abort.signal.aborted) outcome = { kind: "cancelled" };
    else if (err instanceof SaverFailed) outcome = failure("CheckpointerError", err.message, true);
    else if (err instanceof RangeError && /heap|memory/i.test(err.message)) {
      outcome = failure("MemoryError", "the run exceeded the runner's memory limit", true, true);
    } else {
      console.error(err);
      outcome = failure(err?.name ?? "Error", String(err?.message ?? err));
    }
  }
  run.channel.send({ t: "done", outcome });
}
