// The official JS SDK (@langchain/langgraph-sdk) against a running `mostrador dev --demo-data`,
// driven the way its React hook `useStream` (dist/react/stream.lgp.js) drives it, without React:
// the same client calls with the same arguments, the events fed to the hook's own StreamManager
// and MessageTupleManager (exported by `@langchain/langgraph-sdk/ui`), and every request passed
// through a fetch that applies a browser's CORS rules (preflight, exposed response headers), as
// the hook runs in a page served from another local origin. Run by tests/js/run; exits non-zero on
// the first mismatch.
//
// Environment: MOSTRADOR_URL; CLERK_TOKEN (pepe, clerk of madrid-centro), OTHER_CLERK_TOKEN (a
// clerk of barcelona-gracia); CUSTOMER_TOKEN (ana, customer of madrid-centro) and MANAGER_TOKEN
// (marta, its manager), for the refund the manager approves; DEV_API_KEY (the key `mostrador dev` printed).

import { Client } from "@langchain/langgraph-sdk";
import {
  MessageTupleManager,
  StreamManager,
  getBranchContext,
  unique,
  userFacingInterruptsFromThreadTasks,
  userFacingInterruptsFromValuesArray,
} from "@langchain/langgraph-sdk/ui";

const URL_ = process.env.MOSTRADOR_URL;
const ORIGIN = "http://localhost:5173"; // a chat UI's dev server (Vite's default port)
const ASSISTANT = "tienda";
const QUESTION = "¿Quedan zapatillas de trail Cumbre 42?";
const FOLLOW_UP = "¿Y zapatillas de running Asfalto 41?";

class Mismatch extends Error {}

function check(condition, message, detail) {
  if (!condition) {
    const shown = detail === undefined ? "" : `\n  got: ${JSON.stringify(detail, null, 1)?.slice(0, 2000)}`;
    throw new Mismatch(`${message}${shown}`);
  }
}

function ok(what) {
  console.log(`${what}: ok`);
}

// ---------------------------------------------------------------------------------------------
// A browser's fetch: a preflight for what is not a simple request, the response readable only if
// it allows the page's origin, and only the CORS-safelisted and exposed response headers visible
// (so `Content-Location` must be exposed for onRunCreated, `Location` for reconnects).

const SAFE_REQUEST_HEADERS = new Set(["accept", "accept-language", "content-language"]);
const SIMPLE_CONTENT_TYPES = ["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"];
const SAFE_RESPONSE_HEADERS = new Set([
  "cache-control", "content-language", "content-length", "content-type", "expires", "last-modified", "pragma",
]);
const requests = [];

function listed(header) {
  return (header ?? "").split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
}

async function browserFetch(url, init = {}) {
  const method = (init.method ?? "GET").toUpperCase();
  const headers = Object.fromEntries(
    Object.entries(init.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]),
  );
  requests.push({ method, url: new URL(url), headers, body: init.body });
  const unsafe = Object.keys(headers)
    .filter((name) => {
      if (name === "content-type") return !SIMPLE_CONTENT_TYPES.some((t) => headers[name].startsWith(t));
      return !SAFE_REQUEST_HEADERS.has(name);
    })
    .sort();
  const what = `${method} ${new URL(url).pathname}`;
  if (unsafe.length || !["GET", "HEAD", "POST"].includes(method)) {
    const preflight = await fetch(url, {
      method: "OPTIONS",
      headers: {
        Origin: ORIGIN,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": unsafe.join(","),
      },
    });
    check(preflight.ok, `CORS preflight of ${what} from ${ORIGIN} answered ${preflight.status}`);
    check(
      preflight.headers.get("access-control-allow-origin") === ORIGIN,
      `CORS preflight of ${what}: access-control-allow-origin is not ${ORIGIN}`,
      preflight.headers.get("access-control-allow-origin"),
    );
    const methods = listed(preflight.headers.get("access-control-allow-methods"));
    check(
      ["GET", "HEAD", "POST"].includes(method) || methods.includes(method.toLowerCase()) || methods.includes("*"),
      `CORS preflight of ${what}: method not allowed`, methods,
    );
    const allowed = listed(preflight.headers.get("access-control-allow-headers"));
    for (const name of unsafe) {
      check(
        allowed.includes(name) || (allowed.includes("*") && name !== "authorization"),
        `CORS preflight of ${what}: request header ${name} not allowed`, allowed,
      );
    }
  }
  const response = await fetch(url, { ...init, headers: { ...init.headers, Origin: ORIGIN } });
  check(
    response.headers.get("access-control-allow-origin") === ORIGIN,
    `${what} from ${ORIGIN}: a browser would refuse the response (access-control-allow-origin)`,
    response.headers.get("access-control-allow-origin"),
  );
  const exposed = new Set(listed(response.headers.get("access-control-expose-headers")));
  const visible = new Headers();
  response.headers.forEach((value, name) => {
    if (SAFE_RESPONSE_HEADERS.has(name) || exposed.has(name) || exposed.has("*")) visible.append(name, value);
  });
  const nullBody = [101, 204, 205, 304].includes(response.status);
  return new Response(nullBody ? null : response.body, {
    status: response.status,
    statusText: response.statusText,
    headers: visible,
  });
}

function lastRequest(method, pathSuffix) {
  return requests.findLast((r) => r.method === method && r.url.pathname.endsWith(pathSuffix));
}

// ---------------------------------------------------------------------------------------------
// useStream, without React: what `useStreamLGP` does on submit, on joinStream and after a run,
// with the options a chat UI passes (agent-chat-ui: streamSubgraphs, streamResumable,
// fetchStateHistory, reconnectOnMount; callbacks for updates and custom events).

const getMessages = (values) => (Array.isArray(values?.messages) ? values.messages : []);
const setMessages = (values, messages) => ({ ...values, messages });

class UseStream {
  constructor(client, assistantId) {
    this.client = client;
    this.assistantId = assistantId;
    this.messageManager = new MessageTupleManager();
    this.stream = new StreamManager(this.messageManager, { throttle: false });
    this.threadId = null;
    this.history = undefined; // fetchStateHistory: true, its default limit of 10
    this.rendered = []; // every `messages` the page would render while streaming
    this.lastStreamValues = null;
    this.stream.subscribe(() => {
      const values = this.stream.values;
      if (values) this.lastStreamValues = values;
      if (values) this.rendered.push(getMessages(values).map((m) => ({ id: m.id, type: m.type, content: m.content })));
    });
    // Accessing `messages` tracks messages-tuple and values; the callbacks add theirs.
    this.trackedModes = ["messages-tuple", "values"];
    this.callbackModes = ["updates", "custom"];
    this.updates = [];
    this.custom = [];
    this.metadata = [];
    this.created = [];
    this.errors = [];
  }

  get historyHead() {
    return getBranchContext("", this.history).threadHead;
  }

  // What the page shows: the stream's values, else the thread head's.
  get values() {
    return this.stream.values ?? this.historyHead?.values ?? {};
  }

  get messages() {
    return getMessages(this.values);
  }

  // The hook's `interrupts`: from the streamed values, else from the thread head's tasks.
  get interrupts() {
    const values = this.values;
    if (Array.isArray(values?.__interrupt__)) return userFacingInterruptsFromValuesArray(values.__interrupt__);
    if (this.stream.isLoading) return [];
    const head = this.historyHead;
    const fromTasks = userFacingInterruptsFromThreadTasks((head?.tasks ?? []).flatMap((t) => t.interrupts ?? []));
    if (fromTasks != null) return fromTasks;
    return (head?.next ?? []).length ? [{ when: "breakpoint" }] : [];
  }

  async fetchHistory() {
    this.history = await this.client.threads.getHistory(this.threadId, { limit: 10 });
    return this.history;
  }

  callbacks() {
    return {
      onUpdateEvent: (data, { namespace }) => this.updates.push({ data, namespace }),
      onCustomEvent: (data, { namespace }) => this.custom.push({ data, namespace }),
      onMetadataEvent: (data) => this.metadata.push(data),
    };
  }

  // The events the hook consumed, as the SDK yielded them (copied: the hook rewrites a chunk's
  // type in place).
  tee(parts, into) {
    return (async function* () {
      for await (const part of parts) {
        into.push(structuredClone(part));
        yield part;
      }
    })();
  }

  async submit(values, submitOptions = {}) {
    const events = [];
    const initialValues = this.historyHead?.values ?? {};
    await this.stream.start(async (signal) => {
      this.stream.setStreamValues((previous) => ({ ...initialValues, ...previous }));
      if (!this.threadId) {
        const thread = await this.client.threads.create({ metadata: submitOptions.metadata, signal });
        this.threadId = thread.thread_id;
        this.thread = thread;
      }
      const streamMode = unique([...(submitOptions.streamMode ?? []), ...this.trackedModes, ...this.callbackModes]);
      return this.tee(
        this.client.runs.stream(this.threadId, this.assistantId, {
          input: values,
          command: submitOptions.command,
          metadata: submitOptions.metadata,
          onDisconnect: "continue",
          signal: submitOptions.signal ?? signal,
          streamMode,
          streamSubgraphs: true,
          streamResumable: true,
          onRunCreated: (params) => this.created.push({ ...params, thread_id: params.thread_id ?? this.threadId }),
        }),
        events,
      );
    }, {
      getMessages,
      setMessages,
      initialValues,
      callbacks: this.callbacks(),
      onSuccess: async () => {
        await this.fetchHistory();
        return null; // the page falls back to the thread head it just read
      },
      onError: (error) => this.errors.push(error),
    });
    return events;
  }

  async joinStream(runId, lastEventId) {
    const events = [];
    lastEventId ??= "-1";
    await this.stream.start(async (signal) => this.tee(
      this.client.runs.joinStream(this.threadId, runId, {
        signal,
        lastEventId,
        checkpointId: this.historyHead?.checkpoint?.checkpoint_id ?? undefined,
      }),
      events,
    ), {
      getMessages,
      setMessages,
      initialValues: this.historyHead?.values ?? {},
      callbacks: this.callbacks(),
      onSuccess: async () => {
        await this.fetchHistory();
        return null;
      },
      onError: (error) => this.errors.push(error),
      isReplaying: lastEventId === "-1",
    });
    return events;
  }
}

// ---------------------------------------------------------------------------------------------
// Shapes of what the SDK yields.

const KNOWN_EVENTS = new Set(["metadata", "values", "updates", "messages", "custom"]);

function checkEvents(events, what, runId) {
  const names = events.map((e) => e.event);
  check(names[0] === "metadata", `${what}: the first event is not metadata`, names);
  check(events[0].data.run_id === runId, `${what}: metadata.run_id is not the run's id`, events[0].data);
  check(Number.isInteger(events[0].data.attempt), `${what}: metadata.attempt is not an integer`, events[0].data);
  // Closed after the run's last event, with no `end` of its own, as the official server's.
  check(!names.includes("end"), `${what}: an end event`, names.slice(-3));
  for (const name of names) check(KNOWN_EVENTS.has(name), `${what}: unexpected event ${name}`, names);
  for (const name of ["values", "updates", "messages"]) {
    check(names.includes(name), `${what}: no ${name} event`, unique(names));
  }
  const ids = events.slice(1).map((e) => e.id);
  check(ids.every((id) => typeof id === "string" && id !== ""), `${what}: a resumable stream's event without id`, ids);
  check(new Set(ids).size === ids.length, `${what}: repeated event ids`, ids);
  for (const e of events) {
    if (e.event === "values") {
      check(Array.isArray(e.data?.messages), `${what}: values without a messages list`, e.data);
    } else if (e.event === "updates") {
      const nodes = Object.keys(e.data ?? {});
      check(nodes.length === 1 && ["agent", "tools"].includes(nodes[0]), `${what}: updates not keyed by a node`, e.data);
      check(Array.isArray(e.data[nodes[0]].messages), `${what}: a node's update without messages`, e.data);
    } else if (e.event === "messages") {
      check(Array.isArray(e.data) && e.data.length === 2, `${what}: messages is not [chunk, metadata]`, e.data);
      const [chunk, metadata] = e.data;
      check(chunk.type === "AIMessageChunk" && typeof chunk.content === "string" && typeof chunk.id === "string",
        `${what}: a messages chunk is not an AIMessageChunk with an id`, chunk);
      check(metadata?.langgraph_node === "agent", `${what}: a chunk's metadata has no langgraph_node`, metadata);
    }
  }
  const values = events.filter((e) => e.event === "values");
  const final = values.at(-1).data.messages;
  const answer = final.at(-1);
  check(answer.type === "ai" && answer.content.length > 0 && !answer.tool_calls?.length,
    `${what}: the last values do not end with the answer`, answer);
  const chunks = events.filter((e) => e.event === "messages" && e.data[0].id === answer.id);
  check(chunks.length > 5, `${what}: the answer was not streamed token by token`, chunks.length);
  check(chunks.map((e) => e.data[0].content).join("") === answer.content,
    `${what}: the chunks do not add up to the answer`, { chunks: chunks.map((e) => e.data[0].content), answer });
  return { final, answer };
}

const brief = (messages) => messages.map((m) => ({ id: m.id, type: m.type, content: m.content }));

function sameMessages(a, b) {
  return JSON.stringify(brief(a)) === JSON.stringify(brief(b));
}

const wire = (events) => events.filter((e) => e.event !== "metadata").map((e) => ({ id: e.id, event: e.event, data: e.data }));

// ---------------------------------------------------------------------------------------------

async function main() {
  const clerk = new Client({
    apiUrl: URL_,
    apiKey: null,
    defaultHeaders: { Authorization: `Bearer ${process.env.CLERK_TOKEN}` },
    callerOptions: { fetch: browserFetch },
  });
  const otherClerk = new Client({
    apiUrl: URL_,
    apiKey: null,
    defaultHeaders: { Authorization: `Bearer ${process.env.OTHER_CLERK_TOKEN}` },
    callerOptions: { fetch: browserFetch },
  });

  // The graphs served: what a UI lists to pick an assistant.
  const assistants = await clerk.assistants.search({ limit: 100 });
  const tienda = assistants.find((a) => a.graph_id === ASSISTANT);
  check(tienda && /^[0-9a-f-]{36}$/.test(tienda.assistant_id), "assistants.search does not list tienda",
    assistants.map((a) => a.graph_id));
  // The key `mostrador dev` printed, as the SDK's apiKey option sends it (x-api-key).
  const keyed = new Client({ apiUrl: URL_, apiKey: process.env.DEV_API_KEY, callerOptions: { fetch: browserFetch } });
  check((await keyed.assistants.search({ graphId: ASSISTANT })).some((a) => a.graph_id === ASSISTANT),
    "assistants.search with the dev API key (x-api-key) does not list tienda");
  check(lastRequest("POST", "/assistants/search").headers["x-api-key"] === process.env.DEV_API_KEY,
    "the SDK did not send its apiKey as x-api-key");
  ok("assistants.search (bearer token, and the dev API key as x-api-key)");

  // submit() on a new thread: threads.create with the submit's metadata, then runs.stream.
  const ui = new UseStream(clerk, ASSISTANT);
  const started = Date.now();
  const events = await ui.submit(
    { messages: [{ type: "human", content: QUESTION }] },
    { metadata: { title: "Cumbre 42" } },
  );
  check(ui.errors.length === 0 && ui.stream.error === undefined, "useStream saw an error", String(ui.errors[0] ?? ui.stream.error));
  check(ui.thread.metadata?.title === "Cumbre 42", "threads.create did not keep the metadata", ui.thread);
  const createBody = JSON.parse(lastRequest("POST", "/threads").body);
  check(JSON.stringify(createBody) === JSON.stringify({ metadata: { title: "Cumbre 42" } }),
    "threads.create sent an unexpected body", createBody);
  const streamRequest = lastRequest("POST", `/threads/${ui.threadId}/runs/stream`);
  const streamBody = JSON.parse(streamRequest.body);
  check(
    JSON.stringify(streamBody.stream_mode) === JSON.stringify(["messages-tuple", "values", "updates", "custom"])
      && streamBody.stream_subgraphs === true && streamBody.stream_resumable === true
      && streamBody.on_disconnect === "continue" && streamBody.assistant_id === ASSISTANT,
    "runs.stream did not send what useStream asks", streamBody,
  );
  check(ui.created.length === 1, "onRunCreated was not called once (Content-Location, exposed to the page)", ui.created);
  const runId = ui.created[0].run_id;
  check(ui.created[0].thread_id === ui.threadId, "onRunCreated's thread_id is not the thread's", ui.created[0]);
  const { final, answer } = checkEvents(events, "runs.stream", runId);
  check(answer.content.includes("Madrid Norte") && answer.content.includes("89,90 €"),
    "the answer does not name the store that has them and the price", answer.content);
  const run = await clerk.runs.get(ui.threadId, runId);
  check(run.run_id === runId && run.thread_id === ui.threadId && run.status === "success",
    "runs.get of onRunCreated's run id", run);
  check(ui.metadata.length === 1 && ui.metadata[0].run_id === runId, "onMetadataEvent did not get the run id", ui.metadata);
  check(ui.updates.length === events.filter((e) => e.event === "updates").length
    && ui.updates.every((u) => u.namespace === undefined), "onUpdateEvent did not get every update, unnamespaced", ui.updates);
  check(ui.custom.length === 0, "tienda wrote custom events", ui.custom);
  ok(`runs.stream as useStream.submit (${events.length} events, ${Date.now() - started} ms; onRunCreated, values, updates, messages-tuple)`);

  // What the page rendered: the answer growing token by token, then the whole conversation.
  const growing = ui.rendered.filter((m) => m.at(-1)?.id === answer.id).map((m) => m.at(-1).content);
  check(growing.length > 5 && growing.some((c) => c.length > 0 && c.length < answer.content.length),
    "the page never showed the answer partly written", growing.slice(0, 5));
  check(growing.every((c, i) => i === 0 || c.startsWith(growing[i - 1]) || c === answer.content),
    "the answer shown did not grow monotonically", growing);
  check(sameMessages(ui.rendered.findLast((m) => m.length > 0), final),
    "the last messages the stream rendered are not the final values", ui.rendered.at(-1));
  check(ui.stream.values === null && sameMessages(ui.messages, final),
    "after the run the page does not show the thread head's messages", brief(ui.messages));
  check(brief(final).map((m) => m.type).join(",") === "human,ai,tool,ai,tool,ai",
    "the conversation is not question, tool call, result, tool call, result, answer", brief(final));
  ok("useStream's StreamManager: the answer streamed token by token, then the thread head");

  // The history useStream reads after the run (fetchStateHistory: true → limit 10), as a POST.
  const historyRequest = lastRequest("POST", `/threads/${ui.threadId}/history`);
  check(historyRequest && JSON.stringify(JSON.parse(historyRequest.body)) === JSON.stringify({ limit: 10 }),
    "getHistory was not POST /threads/{id}/history {limit: 10}", historyRequest && historyRequest.body);
  const history = ui.history;
  check(history.length === 6, "the history does not have the input and five steps", history.length);
  history.forEach((state, i) => {
    check(typeof state.checkpoint?.checkpoint_id === "string" && state.checkpoint.thread_id === ui.threadId,
      `history[${i}] without a checkpoint of the thread`, state.checkpoint);
    if (i + 1 < history.length) {
      check(state.parent_checkpoint?.checkpoint_id === history[i + 1].checkpoint.checkpoint_id,
        `history[${i}]'s parent is not history[${i + 1}]`, state.parent_checkpoint);
    }
  });
  check(history.at(-1).parent_checkpoint == null, "the oldest checkpoint has a parent", history.at(-1).parent_checkpoint);
  const branches = getBranchContext("", history);
  check(branches.threadHead.checkpoint.checkpoint_id === history[0].checkpoint.checkpoint_id
    && branches.flatHistory.length === history.length, "useStream's branch context of the history", {
    head: branches.threadHead.checkpoint, flat: branches.flatHistory.length,
  });
  check(sameMessages(history[0].values.messages, final) && history[0].next.length === 0,
    "the history's head is not the final state", brief(history[0].values.messages));
  ok("threads.getHistory as useStream reads it (POST, limit 10; a linear branch)");

  // useStream without fetchStateHistory reads the state instead, and so does a page.
  const state = await clerk.threads.getState(ui.threadId);
  check(state.checkpoint?.checkpoint_id === history[0].checkpoint.checkpoint_id, "getState's checkpoint is not the history's head",
    state.checkpoint);
  check(sameMessages(state.values.messages, final) && state.next.length === 0 && state.tasks.length === 0
    && state.interrupts.length === 0, "getState of a finished run", { ...state, values: brief(state.values.messages) });
  ok("threads.getState");

  // A page reloaded: useStream rejoins the run it stored with joinStream(lastEventId "-1"),
  // replaying the run from its first event.
  const replay = new UseStream(clerk, ASSISTANT);
  replay.threadId = ui.threadId;
  await replay.fetchHistory();
  const replayed = await replay.joinStream(runId);
  check(replay.errors.length === 0, "joinStream saw an error", String(replay.errors[0]));
  const joinRequest = lastRequest("GET", `/runs/${runId}/stream`);
  check(joinRequest.headers["last-event-id"] === "-1", "joinStream did not send Last-Event-ID: -1", joinRequest.headers);
  check(replayed[0].event === "metadata" && replayed[0].data.run_id === runId, "the joined stream's metadata", replayed[0]);
  check(JSON.stringify(wire(replayed)) === JSON.stringify(wire(events)),
    "joinStream(lastEventId -1) is not the run's stream replayed", { joined: wire(replayed).map((e) => `${e.id}:${e.event}`) });
  check(sameMessages(replay.messages, final), "the rejoined page does not show the conversation", brief(replay.messages));
  check(replay.rendered.some((m) => m.at(-1)?.id === answer.id && m.at(-1).content.length < answer.content.length),
    "the replay did not restart the streamed answer (isReplaying)", replay.rendered.length);
  // And after a real event id: the events after it, none before.
  const cut = events.findIndex((e) => e.event === "values" && e.data.messages.length === 3);
  const after = [];
  for await (const part of clerk.runs.joinStream(ui.threadId, runId, { lastEventId: events[cut].id })) after.push(part);
  check(JSON.stringify(wire(after)) === JSON.stringify(wire(events.slice(cut + 1))),
    `joinStream(lastEventId ${events[cut].id}) is not the events after it`, wire(after).map((e) => `${e.id}:${e.event}`));
  ok(`runs.joinStream (lastEventId -1: the ${replayed.length} events again; after id ${events[cut].id}: the ${after.length - 1} after it)`);

  // A page closed mid-run (onDisconnect "continue"): the run goes on; the page that comes back
  // rejoins with joinStream("-1") (reconnectOnMount) while it is still running, and a client
  // that kept the last id it saw gets exactly the rest. The follow-up continues the thread.
  const closing = new AbortController();
  const seenBefore = [];
  let secondRun;
  for await (const part of clerk.runs.stream(ui.threadId, ASSISTANT, {
    input: { messages: [{ type: "human", content: FOLLOW_UP }] },
    onDisconnect: "continue",
    signal: closing.signal,
    streamMode: ["messages-tuple", "values", "updates", "custom"],
    streamSubgraphs: true,
    streamResumable: true,
    onRunCreated: (params) => { secondRun = params.run_id; },
  })) {
    seenBefore.push(part);
    if (part.event === "messages") {
      closing.abort();
      break;
    }
  }
  check(secondRun && seenBefore[0].data.run_id === secondRun, "the follow-up's onRunCreated", { secondRun, first: seenBefore[0] });
  const inFlight = await clerk.runs.get(ui.threadId, secondRun);
  check(["pending", "running"].includes(inFlight.status),
    "the run stopped when the page closed its stream (onDisconnect continue); the check needs it in flight", inFlight.status);
  const back = new UseStream(clerk, ASSISTANT);
  back.threadId = ui.threadId;
  await back.fetchHistory();
  const rejoined = await back.joinStream(secondRun);
  check(back.errors.length === 0, "the rejoin saw an error", String(back.errors[0]));
  const second = checkEvents(rejoined, "joinStream(-1) of a run in flight", secondRun);
  check(JSON.stringify(wire(rejoined).slice(0, seenBefore.length - 1)) === JSON.stringify(wire(seenBefore)),
    "the rejoined stream does not start with what the closed page saw", {
      seen: wire(seenBefore).map((e) => `${e.id}:${e.event}`), rejoined: wire(rejoined).slice(0, seenBefore.length).map((e) => `${e.id}:${e.event}`),
    });
  const lastSeen = seenBefore.at(-1).id;
  const rest = [];
  for await (const part of clerk.runs.joinStream(ui.threadId, secondRun, { lastEventId: lastSeen })) rest.push(part);
  check(JSON.stringify(wire(seenBefore).concat(wire(rest))) === JSON.stringify(wire(rejoined)),
    `what the page saw and the rest after id ${lastSeen} are not the whole stream`, wire(rest).map((e) => `${e.id}:${e.event}`));
  check(second.final.length === final.length + 6 && sameMessages(second.final.slice(0, final.length), final)
    && second.final[final.length].content === FOLLOW_UP, "the follow-up did not continue the conversation", brief(second.final));
  check(sameMessages(back.messages, second.final), "the page that came back does not show the whole conversation", brief(back.messages));
  check((await clerk.runs.get(ui.threadId, secondRun)).status === "success", "the follow-up's run did not succeed");
  ok(`a stream closed mid-run, rejoined (-1: ${rejoined.length} events, after id ${lastSeen}: the rest)`);

  // stop(): useStream (reconnectOnMount) cancels the stored run, runs.cancel(thread, run).
  const stopped = new AbortController();
  let thirdRun;
  const stoppedThread = await clerk.threads.create({ metadata: { title: "parar" } });
  const partsBeforeStop = [];
  for await (const part of clerk.runs.stream(stoppedThread.thread_id, ASSISTANT, {
    input: { messages: [{ type: "human", content: QUESTION }] },
    onDisconnect: "continue",
    signal: stopped.signal,
    streamMode: ["messages-tuple", "values", "updates", "custom"],
    streamSubgraphs: true,
    streamResumable: true,
    onRunCreated: (params) => { thirdRun = params.run_id; },
  })) {
    partsBeforeStop.push(part);
    if (part.event === "messages") {
      stopped.abort();
      break;
    }
  }
  const cancelled = await clerk.runs.cancel(stoppedThread.thread_id, thirdRun);
  const cancelRequest = lastRequest("POST", `/runs/${thirdRun}/cancel`);
  check(cancelRequest.url.search === "?wait=0&action=interrupt", "runs.cancel's query", cancelRequest.url.search);
  check(cancelled === undefined || cancelled === null || typeof cancelled === "object", "runs.cancel's answer", cancelled);
  await clerk.runs.join(stoppedThread.thread_id, thirdRun);
  const afterStop = await clerk.runs.get(stoppedThread.thread_id, thirdRun);
  check(afterStop.status === "interrupted", "a run cancelled by stop() is not interrupted", afterStop.status);
  ok("stop(): runs.cancel of the stored run (interrupted)");

  // The sidebar: the threads of this graph, by graph_id or by the assistant's id (agent-chat-ui
  // uses assistant_id when it is a UUID), the latest first; none of another store's clerk.
  const byGraph = await clerk.threads.search({ metadata: { graph_id: ASSISTANT }, limit: 100 });
  const listedThread = byGraph.find((t) => t.thread_id === ui.threadId);
  check(listedThread, "threads.search by graph_id does not list the thread", byGraph.map((t) => t.thread_id));
  check(listedThread.metadata.title === "Cumbre 42" && listedThread.metadata.graph_id === ASSISTANT
    && listedThread.metadata.assistant_id === tienda.assistant_id && listedThread.status === "idle",
  "a listed thread's metadata and status", listedThread);
  check(sameMessages(getMessages(listedThread.values), second.final), "a listed thread's values", listedThread.values);
  const byAssistant = await clerk.threads.search({ metadata: { assistant_id: tienda.assistant_id }, limit: 100 });
  check(JSON.stringify(byAssistant.map((t) => t.thread_id).sort()) === JSON.stringify(byGraph.map((t) => t.thread_id).sort()),
    "threads.search by assistant_id differs from by graph_id", { byAssistant: byAssistant.length, byGraph: byGraph.length });
  const latest = await clerk.threads.search({ metadata: { graph_id: ASSISTANT }, sortBy: "updated_at", sortOrder: "desc", limit: 10 });
  check(latest[0]?.thread_id === stoppedThread.thread_id, "threads.search sorted by updated_at desc: the latest first",
    latest.map((t) => [t.thread_id, t.updated_at]));
  const theirs = await otherClerk.threads.search({ metadata: { graph_id: ASSISTANT }, limit: 100 });
  check(!theirs.some((t) => t.thread_id === ui.threadId), "another store's clerk lists this store's thread", theirs);
  // A refund through the cliente graph: the customer's page shows the manager's pending
  // decision as the hook's interrupt, from the stream and then from the thread head; the
  // manager's page resumes it with submit(undefined, {command: {resume}}).
  const customer = new UseStream(new Client({
    apiUrl: URL_, apiKey: null, callerOptions: { fetch: browserFetch },
    defaultHeaders: { Authorization: `Bearer ${process.env.CUSTOMER_TOKEN}` },
  }), "cliente");
  const refundEvents = await customer.submit({ messages: [{ type: "human", content: "Quiero devolver el pedido PED-1001" }] });
  check(customer.errors.length === 0, "the refund's stream saw an error", String(customer.errors[0]));
  const interruptEvents = refundEvents.filter((e) => e.event === "values" && e.data.__interrupt__);
  check(interruptEvents.length === 1, "no values event with __interrupt__ at the manager's decision",
    refundEvents.map((e) => e.event));
  const streamed = customer.lastStreamValues;
  check(streamed.__interrupt__?.[0]?.value?.type === "refund_approval" && getMessages(streamed).length > 1,
    "the page's streamed values do not hold both the conversation and the interrupt",
    { interrupt: streamed.__interrupt__, messages: getMessages(streamed).length });
  const pending = customer.interrupts;
  check(pending.length === 1 && pending[0].value?.type === "refund_approval" && pending[0].value.order_id === "PED-1001"
    && typeof pending[0].id === "string", "useStream's interrupts from the thread head", pending);
  check(JSON.stringify(customer.historyHead.next) === JSON.stringify(["approval"]), "the thread head's next", customer.historyHead.next);
  const waiting = (await customer.client.threads.search({ metadata: { graph_id: "cliente" }, limit: 100 }))
    .find((t) => t.thread_id === customer.threadId);
  check(waiting?.status === "interrupted" && Object.values(waiting.interrupts ?? {}).flat()[0]?.value?.type === "refund_approval",
    "the sidebar does not show the refund thread as interrupted", waiting);
  const manager = new UseStream(new Client({
    apiUrl: URL_, apiKey: null, callerOptions: { fetch: browserFetch },
    defaultHeaders: { Authorization: `Bearer ${process.env.MANAGER_TOKEN}` },
  }), "cliente");
  manager.threadId = customer.threadId;
  await manager.fetchHistory();
  check(manager.interrupts[0]?.value?.type === "refund_approval", "the manager's page does not show the decision", manager.interrupts);
  // A decision names the approval it pays, as the interrupt shows it.
  const decision = { decision: "approve", approval_id: manager.interrupts[0].value.approval_id };
  await manager.submit(undefined, { command: { resume: decision } });
  check(manager.errors.length === 0, "the resume saw an error", String(manager.errors[0]));
  const resumeBody = JSON.parse(lastRequest("POST", `/threads/${customer.threadId}/runs/stream`).body);
  check(JSON.stringify(resumeBody.command?.resume) === JSON.stringify(decision) && !("input" in resumeBody),
    "the resume's body", resumeBody);
  check(manager.interrupts.length === 0, "an interrupt is still shown after the decision", manager.interrupts);
  check(String(manager.messages.at(-1)?.content).includes("115,70 €"), "the refund's answer", manager.messages.at(-1));
  ok("interrupt shown by useStream (stream and thread head), resumed with a command by a manager");

  ok(`threads.search as a sidebar lists threads (${byGraph.length} by graph_id and by assistant_id; not another store's)`);
}

main().then(
  () => {
    console.log("@langchain/langgraph-sdk as useStream drives it, against mostrador: all checks passed");
  },
  (error) => {
    console.error(error instanceof Mismatch ? `MISMATCH: ${error.message}` : error);
    process.exit(1);
  },
);
