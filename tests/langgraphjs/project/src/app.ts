// A project's own HTTP routes as LangGraph.js's documentation writes them: a Hono app, its handlers
// reading the caller the project's auth named.
import { Hono } from "hono";

export const app = new Hono();

app.get("/hello", (c) => c.json({ hello: "world", caller: c.get("auth")?.user?.identity ?? null }));

app.get("/greet/:name", (c) => c.text(`hola, ${c.req.param("name")}`));

app.post("/echo", async (c) => c.json({ got: await c.req.json(), query: c.req.query("q") ?? null }, 201));

app.get("/files/*", (c) => c.text(c.req.path));
