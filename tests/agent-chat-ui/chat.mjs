// agent-chat-ui, the chat UI most LangGraph users run, in a real browser against `mostrador dev
// --demo-data`: headless Chromium (Debian's /usr/bin/chromium) driven by playwright-core, the app
// built by tests/agent-chat-ui/run from create-agent-chat-app's Vite template and served from
// another local origin. Everything goes through the page as a user would: its setup form (the
// deployment URL, the graph id and an API key), its chat box, its regenerate button, its history
// sidebar and a reload. The server is asked only to check what the page cannot show (the runs of
// a thread, the thread's state). Exits non-zero on the first mismatch.
//
// Environment: APP_URL (the built app), MOSTRADOR_URL; CLERK_KEY (pepe, clerk of madrid-centro),
// CUSTOMER_KEY (ana, customer of madrid-centro) and MANAGER_KEY (marta, its manager), API keys
// made with `mostrador api-key create`; SCREENSHOTS (a directory); RESUMABLE_APP_URL, optional:
// the same app built with the current SDK and useStream's reconnectOnMount, for the reload.
import { chromium } from "playwright-core";

const APP = process.env.APP_URL;
const API = process.env.MOSTRADOR_URL;
const SHOTS = process.env.SCREENSHOTS;
const QUESTION = "¿Quedan zapatillas de trail Cumbre 42?";
const FOLLOW_UP = "¿Y zapatillas de running Asfalto 41?";
const REFUND = "Quiero devolver el pedido PED-1001";

class Mismatch extends Error {}

function check(condition, message, detail) {
  if (!condition) {
    const shown = detail === undefined ? "" : `\n  got: ${JSON.stringify(detail, null, 1)?.slice(0, 2000)}`;
    throw new Mismatch(`${message}${shown}`);
  }
}

const ok = (what) => console.log(`agent-chat-ui: ${what}: ok`);

/** The api as the page's caller, for what the page does not show. */
async function api(key, method, path, body) {
  const res = await fetch(API + path, {
    method,
    headers: { "x-api-key": key, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  check(res.ok, `${method} ${path} answered ${res.status}`, await res.clone().text());
  return res.json();
}

/** A page of its own browser context (its own localStorage, so its own API key). */
async function openPage(browser, failures) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  page.on("pageerror", (error) => failures.push("page error: " + error.message));
  if (process.env.TRACE) {
    // TRACE=1: the page's requests to the api and everything it logs.
    page.on("request", (r) => r.url().startsWith(API) && console.log(">>", r.method(), r.url(), r.postData() ?? ""));
    page.on("response", (r) => r.url().startsWith(API) && console.log("<<", r.status(), r.url()));
    page.on("console", (message) => console.log("console:", message.text()));
  }
  page.on("console", (message) => {
    if (message.type() === "error") failures.push("console error: " + message.text());
  });
  return page;
}

/** The setup form a first visit shows: deployment URL, assistant / graph id, API key. */
async function connect(page, app, assistantId, key) {
  await page.goto(app + "/");
  await page.fill("#apiUrl", API);
  await page.fill("#assistantId", assistantId);
  await page.fill("#apiKey", key);
  await page.click("form button[type=submit]");
  await page.waitForSelector("textarea");
}

const threadIdOf = (page) => new URL(page.url()).searchParams.get("threadId");

/** The messages as the page renders them: human bubbles and the text of the assistant's answers. */
function shownMessages(page) {
  return page.evaluate(() => {
    const content = document.querySelector(".max-w-3xl.flex-col.gap-4");
    if (!content) return [];
    return [...content.children].flatMap((element) => {
      const human = element.querySelector(":scope p.rounded-3xl");
      if (human) return [{ type: "human", text: human.innerText }];
      const text = element.querySelector(":scope > div > div.py-1");
      return text ? [{ type: "ai", text: text.innerText }] : [];
    });
  });
}

async function lastAnswer(page) {
  return (await shownMessages(page)).filter((m) => m.type === "ai").at(-1)?.text ?? "";
}

const isLoading = (page) => page.locator("form button", { hasText: "Cancel" }).isVisible();

/**
 * Samples the last answer while the page streams it, until the page stops loading: the answer must
 * be seen growing (each sample a prefix of the next) before it is complete.
 */
async function watchAnswer(page, before, alsoShown = []) {
  // Texts the page shows as the last answer that are not this one: the previous answer, and
  // answers above it (while a regenerated answer is replaced, the one above it is the last).
  const notThis = new Set([before, ...alsoShown]);
  const samples = [];
  const deadline = Date.now() + 30_000;
  await page.locator("form button", { hasText: "Cancel" }).waitFor();
  while (Date.now() < deadline) {
    const loading = await isLoading(page);
    const text = await lastAnswer(page);
    if (text && !notThis.has(text) && text !== samples.at(-1)) samples.push(text);
    if (!loading) break;
    await page.waitForTimeout(25);
  }
  check(!(await isLoading(page)), "the answer did not end within 30 s", samples);
  const final = await lastAnswer(page);
  const growing = samples.filter((s) => s !== final);
  check(growing.length >= 2, "the answer was not seen growing token by token (fewer than two partial texts)", samples);
  check(growing.every((s, i) => (growing[i + 1] ?? final).startsWith(s)), "the streamed texts are not prefixes of each other", samples);
  return { final, samples };
}

async function send(page, text) {
  await page.fill("textarea", text);
  await page.keyboard.press("Enter");
}

async function runsOf(key, threadId) {
  return api(key, "GET", `/threads/${threadId}/runs?limit=100`);
}

async function tienda(browser, failures) {
  const key = process.env.CLERK_KEY;
  const page = await openPage(browser, failures);
  await connect(page, APP, "tienda", key);
  ok("connected through the setup form with an API key");

  // The first message: a thread is created, its id put in the URL, the answer streamed.
  await send(page, QUESTION);
  const first = await watchAnswer(page, "");
  const threadId = threadIdOf(page);
  check(threadId, "no threadId in the page's URL", page.url());
  check(first.final.includes("Cumbre 42"), "the first answer", first.final);
  ok(`first answer streamed in ${first.samples.length} growing texts, thread ${threadId}`);

  // The second message goes to the same thread.
  await send(page, FOLLOW_UP);
  const second = await watchAnswer(page, first.final);
  check(threadIdOf(page) === threadId, "the second message left the thread", page.url());
  check(second.final.includes("Asfalto 41"), "the second answer", second.final);
  let shown = await shownMessages(page);
  check(shown.filter((m) => m.type === "human").map((m) => m.text).join("|") === `${QUESTION}|${FOLLOW_UP}`,
    "the page does not show both questions", shown);
  let runs = await runsOf(key, threadId);
  check(runs.length === 2 && runs.every((r) => r.status === "success"), "the thread's runs after two messages", runs);
  ok(`second answer streamed in ${second.samples.length} growing texts, in the same thread (2 runs)`);
  await page.screenshot({ path: `${SHOTS}/tienda-two-messages.png` });

  // Regenerate the last answer: the page asks for a run from the checkpoint before it, a new
  // branch of the thread where the model answers again (the offline model, deterministic, says
  // the same words), streamed in place of the old answer.
  const group = page.locator("div.group.mr-auto").filter({ has: page.locator("div.py-1") }).last();
  await group.hover();
  await group.locator("button", { hasText: "Refresh" }).click();
  const regenerated = await watchAnswer(page, second.final, [first.final]);
  check(regenerated.final === second.final, "the regenerated answer", regenerated.final);
  shown = await shownMessages(page);
  check(shown.filter((m) => m.type === "human").map((m) => m.text).join("|") === `${QUESTION}|${FOLLOW_UP}`,
    "regenerating changed the questions shown", shown);
  check(shown.filter((m) => m.type === "ai" && m.text === second.final).length === 1,
    "the regenerated answer is not shown once, in place of the old one", shown);
  runs = await runsOf(key, threadId);
  const branch = runs.find((r) => r.kwargs?.config?.checkpoint_id);
  check(runs.length === 3 && runs.every((r) => r.status === "success") && branch,
    "regenerating: a third run, from a past checkpoint", runs);
  ok(`regenerate: a run from the checkpoint before the answer (${branch.kwargs.config.checkpoint_id}), streamed again in ${regenerated.samples.length} growing texts`);
  await page.screenshot({ path: `${SHOTS}/tienda-regenerated.png` });

  // The history sidebar lists the thread by its first message; choosing it opens it.
  // The sidebar (off screen while closed) has a toggle of its own before the page header's.
  await page.locator("button:has(svg.lucide-panel-right-close)").last().click();
  const listed = page.locator("button", { hasText: QUESTION }).first();
  await listed.waitFor();
  await page.locator("button", { hasText: "New thread" }).click();
  await page.waitForFunction(() => !new URL(location.href).searchParams.get("threadId"));
  await listed.click();
  await page.waitForFunction((id) => new URL(location.href).searchParams.get("threadId") === id, threadId);
  await page.waitForFunction((question) => document.body.innerText.includes(question), FOLLOW_UP);
  ok("the history sidebar lists the thread and opens it");
  await page.screenshot({ path: `${SHOTS}/tienda-sidebar.png` });
  await page.context().close();
}

async function cliente(browser, failures) {
  // The customer asks for a refund: the graph stops for a manager's decision, which the page shows
  // as the thread's interrupt (agent-chat-ui's generic view: the value is not an Agent Inbox one).
  const customer = await openPage(browser, failures);
  await connect(customer, APP, "cliente", process.env.CUSTOMER_KEY);
  await send(customer, REFUND);
  await customer.locator("form button", { hasText: "Cancel" }).waitFor();
  await customer.locator("form button", { hasText: "Send" }).waitFor();
  await customer.getByText("refund_approval").first().waitFor();
  const threadId = threadIdOf(customer);
  const waiting = await api(process.env.CUSTOMER_KEY, "GET", `/threads/${threadId}/state`);
  check(JSON.stringify(waiting.next) === '["approval"]' && waiting.interrupts[0]?.value?.order_id === "PED-1001",
    "the thread does not wait for the manager", waiting);
  ok(`the refund's interrupt is shown to the customer (thread ${threadId})`);
  await customer.getByText("refund_approval").first().scrollIntoViewIfNeeded();
  await customer.screenshot({ path: `${SHOTS}/cliente-interrupt.png` });

  // The manager opens the same thread with a key of their own and sees the decision asked.
  const manager = await openPage(browser, failures);
  await connect(manager, APP, "cliente", process.env.MANAGER_KEY);
  const url = new URL(manager.url());
  url.searchParams.set("threadId", threadId);
  await manager.goto(url.toString());
  await manager.getByText("refund_approval").first().waitFor();
  ok("the manager's page shows the same interrupt");

  // agent-chat-ui resumes only Agent Inbox interrupts from its page, so the manager's page resumes
  // with the key it holds, from the page (a browser request, CORS and all), as a run with a command.
  // The decision names the approval it pays, as the interrupt shows it.
  const resumed = await manager.evaluate(async ({ api, threadId, approvalId }) => {
    const res = await fetch(`${api}/threads/${threadId}/runs/wait`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": localStorage.getItem("lg:chat:apiKey") },
      body: JSON.stringify({
        assistant_id: "cliente",
        command: { resume: { decision: "approve", approval_id: approvalId } },
      }),
    });
    return { status: res.status, body: await res.json() };
  }, { api: API, threadId, approvalId: waiting.interrupts[0].value.approval_id });
  check(resumed.status === 200, "the manager's resume", resumed);
  const runs = await runsOf(process.env.MANAGER_KEY, threadId);
  check(runs.length === 2 && runs.every((r) => r.status === "success"), "the refund thread's runs", runs);
  for (const page of [manager, customer]) {
    await page.reload();
    await page.waitForFunction(() => document.body.innerText.includes("115,70"));
    check(!(await page.getByText("refund_approval").count()), "an interrupt is still shown after the decision");
  }
  ok("resumed by the manager; both pages show the refund's answer and no interrupt");
  await customer.screenshot({ path: `${SHOTS}/cliente-refunded.png` });
  await manager.context().close();
  await customer.context().close();
}

async function reload(browser, failures) {
  // A reload in the middle of an answer: the page finds the run it started (useStream's
  // reconnectOnMount keeps its id in sessionStorage) and rejoins its stream; the answer goes on
  // growing and completes, and no message is sent again.
  const key = process.env.CLERK_KEY;
  const page = await openPage(browser, failures);
  await connect(page, process.env.RESUMABLE_APP_URL, "tienda", key);
  const created = [];
  page.on("request", (r) => r.method() === "POST" && /\/runs(\/stream|\/wait)?$/.test(r.url()) && created.push(r.url()));
  await send(page, QUESTION);
  await page.waitForFunction(() => {
    const texts = [...document.querySelectorAll("div.group.mr-auto div.py-1")].map((e) => e.innerText);
    return (texts.at(-1) ?? "").length > 10;
  });
  const threadId = threadIdOf(page);
  const partial = await lastAnswer(page);
  check(created.length === 1, "the message made more than one run request", created);
  await page.reload();
  const rejoined = [];
  page.on("request", (r) => r.method() === "GET" && r.url().includes(`/threads/${threadId}/runs/`) && rejoined.push(r.url()));
  const after = await watchAnswer(page, "");
  check(after.final.startsWith("Zapatillas de trail Cumbre 42") && after.final.length > partial.length,
    "the answer after the reload", { partial, after });
  check(rejoined.some((url) => new URL(url).pathname.endsWith("/stream")), "the page did not join the run's stream", rejoined);
  check(created.length === 1, "the reload sent the message again", created);
  const runs = await runsOf(key, threadId);
  check(runs.length === 1 && runs[0].status === "success", "the thread's runs after the reload", runs);
  const state = await api(key, "GET", `/threads/${threadId}/state`);
  check(state.values.messages.filter((m) => m.type === "human").length === 1, "the question was asked twice", state.values);
  ok(`reloaded at ${partial.length} characters: the page rejoined the run's stream and saw it grow in ${after.samples.length} texts to the end (1 run)`);
  await page.screenshot({ path: `${SHOTS}/tienda-reloaded.png` });
  await page.context().close();
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox"],
  });
  const failures = [];
  try {
    await tienda(browser, failures);
    await cliente(browser, failures);
    if (process.env.RESUMABLE_APP_URL) await reload(browser, failures);
    check(failures.length === 0, "the pages logged errors", failures);
  } finally {
    await browser.close();
  }
}

main().then(
  () => console.log("agent-chat-ui against mostrador: all checks passed"),
  (error) => {
    console.error(error instanceof Mismatch ? `MISMATCH: ${error.message}` : error);
    process.exit(1);
  },
);
