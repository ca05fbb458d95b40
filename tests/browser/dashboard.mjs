// The dashboard in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven by
// playwright-core against `mostrador dev`. Started by tests/browser/run, which passes
// MOSTRADOR_URL, CUSTOMER_TOKEN and SCREENSHOT.
import { chromium } from "playwright-core";

const url = process.env.MOSTRADOR_URL;
const screenshot = process.env.SCREENSHOT;
const step = (what) => console.log("dashboard: " + what);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  const failures = [];
  page.on("pageerror", (error) => failures.push("page error: " + error.message));
  page.on("console", (message) => {
    // Refusals the page handles (the customer's 403 on /queue) are logged as failed loads.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      failures.push("console error: " + message.text());
    }
  });
  page.setDefaultTimeout(30_000);

  await page.goto(url + "/dashboard");
  const token = await page.inputValue("#token");
  if (!token.includes(".")) throw new Error("the development token is not filled in: " + JSON.stringify(token));
  step("the development token is filled in");

  // The assistants come from the api with that token.
  await page.waitForSelector("#assistant option[value=tienda]", { state: "attached" });
  await page.selectOption("#assistant", "tienda");
  // Workers are live and the queue answers (the dev token is a manager's).
  await page.waitForSelector("#workers tbody tr");
  step("assistants, workers: " + (await page.locator("#workers tbody tr").first().innerText()).replace(/\s+/g, " "));

  await page.fill("#input", JSON.stringify({ messages: [{ role: "user", content: "¿Quedan zapatillas de trail Cumbre 42?" }] }));
  await page.click("#start-run");
  await page.waitForFunction(() => document.querySelector("#start-note").textContent.startsWith("Started run "));
  const runId = (await page.textContent("#start-note")).replace("Started run ", "").trim();
  step("started run " + runId);

  // The queue shows it in flight on the worker.
  await page.waitForFunction(() => [...document.querySelectorAll("#workers tbody tr td:nth-child(3)")]
    .some((cell) => cell.textContent === "1"));
  step("the worker has the run in flight");

  // Its events arrive through the api's SSE route as the worker publishes them, then it ends.
  await page.waitForSelector('#events li[data-event="metadata"]');
  await page.waitForSelector('#events li[data-event="messages"]');
  await page.waitForSelector('#events li[data-event="values"]');
  await page.waitForFunction(() => document.querySelector("#stream-status").textContent === "ended");
  const events = await page.$$eval("#events li", (items) => items.map((item) => item.dataset.event));
  const ids = await page.$$eval("#events li", (items) => items.map((item) => item.dataset.id).filter(Boolean));
  if (events[0] !== "metadata") throw new Error("the first event is not metadata: " + events.join(","));
  if (new Set(ids).size !== ids.length) throw new Error("an event arrived twice: " + ids.join(","));
  step(`${events.length} events: ${[...new Set(events)].join(", ")}`);

  // The run is listed as a success, and the thread's state holds the answer and its history.
  await page.waitForSelector(`#runs tr[data-run="${runId}"] .status.success`);
  await page.waitForFunction(() => document.querySelector("#state").textContent.includes('"type": "ai"'));
  await page.waitForSelector("#history tbody tr");
  step("the run succeeded; state and history are shown");

  // Queue depth is charted: one sample per refresh, a line per series; the run (slowed by the
  // offline model's latency) was seen running.
  await page.waitForFunction(() => document.querySelectorAll("#queue-chart polyline").length >= 3);
  const legend = (await page.$$eval("#legend span", (spans) => spans.map((span) => span.textContent))).join(", ");
  if (!legend.includes("tienda running")) throw new Error("the running run is not charted: " + legend);
  step("queue depth is charted: " + legend);

  await page.screenshot({ path: screenshot, fullPage: true });
  step("screenshot: " + screenshot);

  // Another caller's token: the run is not theirs, and the queue is for managers.
  await page.fill("#token", process.env.CUSTOMER_TOKEN);
  await page.click("#use-token");
  await page.waitForFunction(() => document.querySelector("#queue-note").textContent.includes("for managers"));
  await page.waitForFunction((run) => !document.querySelector(`#runs tr[data-run="${run}"]`), runId);
  step("a customer's token sees neither the queue nor the manager's run");

  if (failures.length) throw new Error(failures.join("\n"));
} finally {
  await browser.close();
}
