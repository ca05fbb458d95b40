"""The official `langgraph-sdk` client against a running `mostrador dev` serving the end-to-end
test graphs (`mostrador-e2e dev`). Run by `tests/sdk/run`; exits non-zero on the first failure.

Environment: MOSTRADOR_URL, and tokens ANA_TOKEN (customer, store madrid-1), LUIS_TOKEN (customer,
same store) and MARTA_TOKEN (manager of madrid-1); for the retail graphs on the demo data,
PEPE_TOKEN (clerk of madrid-centro), CUSTOMER_TOKEN (ana, customer of madrid-centro) and
MANAGER_TOKEN (marta, manager of madrid-centro). API keys: ANA_API_KEY (`mostrador api-key create`
for ana, customer of madrid-1) and DEV_API_KEY (the one `mostrador dev` printed).
"""

import asyncio
import http.server
import json
import os
import queue
import threading
import zoneinfo

import httpx

from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError, NotFoundError, PermissionDeniedError

URL = os.environ["MOSTRADOR_URL"]
LOG5 = ["s1", "s2", "s3", "s4", "s5"]


def client(token_var):
    token = os.environ[token_var]
    return get_client(url=URL, api_key=None, headers={"Authorization": f"Bearer {token}"})


async def collect(parts):
    return [part async for part in parts]


async def main():
    ana, luis, marta = client("ANA_TOKEN"), client("LUIS_TOKEN"), client("MARTA_TOKEN")

    assistants = await ana.assistants.search(limit=100)
    graph_ids = {assistant["graph_id"] for assistant in assistants}
    assert {"e2e_linear_5", "e2e_approval"} <= graph_ids, graph_ids
    print("assistants: ok")

    thread = await ana.threads.create()
    parts = await collect(
        ana.runs.stream(thread["thread_id"], "e2e_linear_5", input={}, stream_mode=["values", "updates"])
    )
    names = [part.event for part in parts]
    assert names[0] == "metadata", names
    assert "end" not in names, names  # closed after the last event, as the official server does
    assert names.count("updates") == 5, names
    values = [part.data for part in parts if part.event == "values"]
    assert values[-1]["log"] == LOG5, values[-1]
    print("stream (values, updates): ok")

    waited_thread = await ana.threads.create()
    result = await ana.runs.wait(waited_thread["thread_id"], "e2e_linear_5", input={})
    assert result["log"] == LOG5, result
    print("runs.wait: ok")

    stateless = await ana.runs.wait(None, "e2e_linear_5", input={})
    assert stateless["log"] == LOG5, stateless
    # Kept, to be joined: by default a stateless run's thread goes when its run ends.
    batch = await ana.runs.create_batch([
        {"assistant_id": "e2e_linear_5", "input": {}, "on_completion": "keep"},
        {"assistant_id": "e2e_linear_6", "input": {}, "on_completion": "keep"},
    ])
    assert len({run["thread_id"] for run in batch}) == 2, batch
    for run in batch:
        joined = await ana.runs.join(run["thread_id"], run["run_id"])
        assert joined["log"][:5] == LOG5, joined
    [gone] = await ana.runs.create_batch([{"assistant_id": "e2e_linear_5", "input": {}}])
    for _ in range(200):
        try:
            await ana.threads.get(gone["thread_id"])
        except httpx.HTTPStatusError as err:
            assert err.response.status_code == 404, err
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("a stateless run's thread outlived its run")
    print("stateless runs.wait + runs.create_batch (kept, and deleted when done): ok")

    joined_thread = await ana.threads.create()
    run = await ana.runs.create(joined_thread["thread_id"], "e2e_linear_5", input={"delay_ms": 50})
    assert run["status"] == "pending", run
    joined = await ana.runs.join(joined_thread["thread_id"], run["run_id"])
    assert joined["log"] == LOG5, joined
    print("runs.create + runs.join: ok")

    # A client that disconnects mid-stream and reconnects with the last id it saw gets the rest,
    # with no event lost or repeated.
    resumed_thread = await ana.threads.create()
    run = await ana.runs.create(
        resumed_thread["thread_id"], "e2e_linear_5", input={"delay_ms": 100},
        stream_mode=["values", "updates"],
    )
    first = []
    async for part in ana.runs.join_stream(resumed_thread["thread_id"], run["run_id"]):
        first.append(part)
        if len([p for p in first if p.id]) == 3:
            break
    last_id = first[-1].id
    rest = await collect(
        ana.runs.join_stream(resumed_thread["thread_id"], run["run_id"], last_event_id=last_id)
    )
    whole = await collect(ana.runs.join_stream(resumed_thread["thread_id"], run["run_id"]))
    ids = lambda parts: [p.id for p in parts if p.event != "metadata"]
    assert ids(first) + ids(rest) == ids(whole), (ids(first), ids(rest), ids(whole))
    assert len(set(ids(whole))) == len(ids(whole)), ids(whole)
    print("join_stream after a disconnect: ok")

    state = await ana.threads.get_state(waited_thread["thread_id"])
    assert state["values"]["log"] == LOG5, state
    assert state["next"] == [], state
    history = await ana.threads.get_history(waited_thread["thread_id"], limit=20)
    assert len(history) == 6, len(history)  # the input and five supersteps
    assert history[0]["checkpoint_id"] == state["checkpoint_id"]
    print("get_state + get_history: ok")

    # Breakpoints and commands, as LangGraph Studio and chat UIs send them, on the Rust engine.
    paused = (await ana.threads.create())["thread_id"]
    await ana.runs.wait(paused, "e2e_linear_5", input={}, interrupt_before=["s3"])
    state = await ana.threads.get_state(paused)
    assert state["values"]["log"] == ["s1", "s2"] and state["next"] == ["s3"], state
    assert (await ana.threads.get(paused))["status"] == "interrupted"
    parts = await collect(ana.runs.stream(paused, "e2e_linear_5", input=None, interrupt_after=["s3"],
                                          stream_mode="updates"))
    updates = [part.data for part in parts if part.event == "updates"]
    assert updates == [{"s3": {"log": ["s3"]}}, {"__interrupt__": []}], parts
    state = await ana.threads.get_state(paused)
    assert state["values"]["log"] == ["s1", "s2", "s3"] and state["next"] == ["s4"], state
    done = await ana.runs.wait(paused, "e2e_linear_5", input=None)
    assert done["log"] == LOG5, done
    again = await ana.runs.wait(
        paused, "e2e_linear_5", command={"update": {"log": ["edited"]}, "goto": "s5"}
    )
    assert again["log"] == LOG5 + ["edited", "s5"], again
    # An edit of the past: a branch from the checkpoint before s3, the thread's latest from then on.
    history = await ana.threads.get_history(paused, limit=50)
    before_s3 = next(s["checkpoint"] for s in history if s["next"] == ["s3"])
    await ana.threads.update_state(paused, {"log": ["past"]}, checkpoint_id=before_s3["checkpoint_id"])
    state = await ana.threads.get_state(paused)
    assert state["values"]["log"] == ["s1", "s2", "past"] and state["next"] == ["s3"], state
    branch = await ana.runs.wait(paused, "e2e_linear_5", input=None)
    assert branch["log"] == ["s1", "s2", "past", "s3", "s4", "s5"], branch
    print("interrupt_before, interrupt_after, a run without input, command goto + update, "
          "update_state at a past checkpoint: ok")

    # A subgraph of the Rust engine: namespaced events, its state inside its parent's, its
    # interrupt the thread's, resumed through the parent.
    nested = (await ana.threads.create())["thread_id"]
    parts = await collect(ana.runs.stream(nested, "e2e_nested", input={}, stream_mode="updates",
                                          stream_subgraphs=True))
    names = [part.event for part in parts]
    inner = [name for name in names if name.startswith("updates|review:")]
    assert inner and names.count("updates") >= 2, names
    assert any(part.data == {"intake": {"refund": 25, "log": ["intake"]}} for part in parts), parts
    plain = await collect(ana.runs.stream((await ana.threads.create())["thread_id"], "e2e_nested",
                                          input={}, stream_mode="updates"))
    assert all("|" not in part.event for part in plain), [part.event for part in plain]
    state = await ana.threads.get_state(nested, subgraphs=True)
    assert state["next"] == ["review"] and len(state["interrupts"]) == 1, state
    task = state["tasks"][0]
    assert task["state"]["next"] == ["ask"], task
    assert task["state"]["checkpoint"]["checkpoint_ns"].startswith("review:"), task
    assert task["state"]["values"]["refund"] == 25, task
    flat = await ana.threads.get_state(nested)
    assert flat["tasks"][0]["state"] is None and flat["tasks"][0]["checkpoint"]["checkpoint_ns"] == \
        task["state"]["checkpoint"]["checkpoint_ns"], flat
    subgraphs = await ana.assistants.get_subgraphs("e2e_nested")
    assert list(subgraphs) == ["review"], subgraphs
    done = await ana.runs.wait(nested, "e2e_nested", command={"resume": "approved"})
    assert done["decision"] == "approved" and done["refund"] == 25, done
    assert done["log"] == ["intake", "close"], done
    print("a Rust subgraph: namespaced events, its state, its interrupt resumed through its parent: ok")

    cancelled_thread = await ana.threads.create()
    run = await ana.runs.create(
        cancelled_thread["thread_id"], "e2e_linear_5", input={"slow": {"s2": 60000}}
    )
    for _ in range(200):
        if (await ana.runs.get(cancelled_thread["thread_id"], run["run_id"]))["status"] == "running":
            break
        await asyncio.sleep(0.05)
    await ana.runs.cancel(cancelled_thread["thread_id"], run["run_id"], action="interrupt")
    await ana.runs.join(cancelled_thread["thread_id"], run["run_id"])
    ended = await ana.runs.get(cancelled_thread["thread_id"], run["run_id"])
    assert ended["status"] == "interrupted", ended
    print("cancel a running run: ok")

    approval = await ana.threads.create()
    waiting = await ana.runs.wait(approval["thread_id"], "e2e_approval", input={"refund": 40})
    assert waiting["__interrupt__"][0]["value"]["refund"] == 40, waiting
    try:
        await ana.runs.create(approval["thread_id"], "e2e_approval", command={"resume": "approved"})
        raise AssertionError("a customer resumed a decision")
    except PermissionDeniedError:
        pass
    decided = await marta.runs.wait(approval["thread_id"], "e2e_approval", command={"resume": "approved"})
    assert decided["decision"] == "approved" and decided["refund"] == 40, decided
    print("interrupt + resume by a manager: ok")

    mine = {t["thread_id"] for t in await ana.threads.search(limit=100)}
    theirs = {t["thread_id"] for t in await luis.threads.search(limit=100)}
    store = {t["thread_id"] for t in await marta.threads.search(limit=100)}
    assert thread["thread_id"] in mine and not (mine & theirs), (mine, theirs)
    assert mine <= store, (mine, store)
    try:
        await luis.threads.get(thread["thread_id"])
        raise AssertionError("a customer read another's thread")
    except NotFoundError:
        pass
    print("search shows only visible threads: ok")

    cron = await ana.crons.create("e2e_linear_5", schedule="*/5 * * * *", input={})
    assert cron["next_run_date"] and cron["schedule"] == "*/5 * * * *", cron
    on_thread = await ana.crons.create_for_thread(thread["thread_id"], "e2e_linear_5", schedule="0 6 * * *")
    assert on_thread["thread_id"] == thread["thread_id"], on_thread
    mine = await ana.crons.search()
    assert {c["cron_id"] for c in mine} == {cron["cron_id"], on_thread["cron_id"]}, mine
    assert await luis.crons.search() == []
    assert await ana.crons.count() == 2
    # Time zones, as the SDK names them (a string or a tzinfo), and updates.
    zoned = await ana.crons.create(
        "e2e_linear_5", schedule="0 9 * * *", input={}, timezone=zoneinfo.ZoneInfo("Europe/Madrid")
    )
    assert zoned["timezone"] == "Europe/Madrid", zoned
    assert zoned["next_run_date"][11:16] in ("07:00", "08:00"), zoned
    updated = await ana.crons.update(
        zoned["cron_id"], schedule="30 12 * * *", timezone="America/New_York", enabled=False,
        metadata={"team": "ops"},
    )
    assert updated["schedule"] == "30 12 * * *" and updated["timezone"] == "America/New_York", updated
    assert updated["enabled"] is False and updated["metadata"] == {"team": "ops"}, updated
    updated = await ana.crons.update(zoned["cron_id"], enabled=True, end_time=None)
    assert updated["next_run_date"][11:16] in ("16:30", "17:30"), updated
    try:
        await luis.crons.update(zoned["cron_id"], enabled=False)
        raise AssertionError("a customer changed another's cron")
    except NotFoundError:
        pass
    await ana.crons.delete(zoned["cron_id"])
    await ana.crons.delete(cron["cron_id"])
    try:
        await luis.crons.delete(on_thread["cron_id"])
        raise AssertionError("a customer deleted another's cron")
    except NotFoundError:
        pass
    await ana.crons.delete(on_thread["cron_id"])
    assert await ana.crons.search() == []
    print("crons: create (in a time zone), create_for_thread, update, search, count, delete: ok")

    await api_keys(ana, luis)
    await webhooks(ana)
    await retail()


async def webhooks(ana):
    """A run's end POSTed to the webhook it names (`tests/sdk/run` allows 127.0.0.1), and a host
    the operator did not allow refused."""
    bodies = queue.Queue()

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            bodies.put(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = await ana.threads.create()
    result = await ana.runs.wait(thread["thread_id"], "e2e_linear_5", input={}, webhook=url)
    assert result["log"] == LOG5, result
    body = await asyncio.to_thread(bodies.get, True, 30)
    assert body["thread_id"] == thread["thread_id"] and body["status"] == "success", body
    assert body["values"]["log"] == LOG5, body
    try:
        await ana.runs.create(thread["thread_id"], "e2e_linear_5", input={}, webhook="https://example.com/hook")
        raise AssertionError("a webhook to a host nobody allowed was accepted")
    except httpx.HTTPStatusError as err:
        assert err.response.status_code == 422, err
    server.shutdown()
    print("webhooks: the run's end posted to an allowed host, another host refused: ok")


async def api_keys(ana, luis):
    # The SDK's own way: LANGGRAPH_API_KEY in the environment, sent as x-api-key.
    os.environ["LANGGRAPH_API_KEY"] = os.environ["ANA_API_KEY"]
    keyed = get_client(url=URL)
    del os.environ["LANGGRAPH_API_KEY"]
    bearer = get_client(
        url=URL, api_key=None, headers={"Authorization": f"Bearer {os.environ['ANA_API_KEY']}"}
    )
    own = await ana.threads.create()
    foreign = await luis.threads.create()
    for key_client in (keyed, bearer):
        assert (await key_client.threads.get(own["thread_id"]))["thread_id"] == own["thread_id"]
        try:
            await key_client.threads.get(foreign["thread_id"])
            raise AssertionError("ana's key read luis's thread")
        except NotFoundError:
            pass
    result = await keyed.runs.wait(own["thread_id"], "e2e_linear_5", input={})
    assert result["log"] == LOG5, result
    # What the key created is ana's: her token sees it.
    created = await keyed.threads.create()
    assert (await ana.threads.get(created["thread_id"]))["thread_id"] == created["thread_id"]

    dev = get_client(url=URL, api_key=os.environ["DEV_API_KEY"])
    assert any(a["graph_id"] == "e2e_linear_5" for a in await dev.assistants.search(limit=100))
    try:
        await get_client(url=URL, api_key="mostrador_" + "0" * 64).assistants.search()
        raise AssertionError("an unknown key got in")
    except AuthenticationError:
        pass
    print("API keys (x-api-key from LANGGRAPH_API_KEY, bearer, the dev key, an unknown one): ok")


async def retail():
    pepe, customer, manager = client("PEPE_TOKEN"), client("CUSTOMER_TOKEN"), client("MANAGER_TOKEN")
    question = {"messages": [{"role": "user", "content": "¿Quedan zapatillas de trail Cumbre 42?"}]}

    parts = await collect(pepe.runs.stream(None, "tienda", input=question, stream_mode="messages"))
    names = [part.event for part in parts]
    assert "messages/metadata" in names, names
    partials = [part.data[0] for part in parts if part.event == "messages/partial"]
    assert len(partials) > 5, partials
    answer = partials[-1]
    assert answer["type"] == "ai" and "Madrid Norte" in answer["content"], answer
    same = [p["content"] for p in partials if p["id"] == answer["id"]]
    assert all(later.startswith(earlier) for earlier, later in zip(same, same[1:])), same
    print("tienda, stream_mode messages (partial): ok")

    parts = await collect(pepe.runs.stream(None, "tienda", input=question, stream_mode="messages-tuple"))
    chunks = [part.data for part in parts if part.event == "messages"]
    assert chunks and all(c[0]["type"] == "AIMessageChunk" for c in chunks), chunks
    assert chunks[0][1]["langgraph_node"] == "agent", chunks[0]
    assert "".join(c[0]["content"] for c in chunks) == answer["content"]
    print("tienda, stream_mode messages-tuple: ok")

    thread = await customer.threads.create()
    ask = {"messages": [{"role": "user", "content": "Quiero devolver el pedido PED-1001"}]}
    waiting = await customer.runs.wait(thread["thread_id"], "cliente", input=ask)
    request = waiting["__interrupt__"][0]["value"]
    assert request["type"] == "refund_approval" and request["order_id"] == "PED-1001", request
    # A decision names the approval it pays, as the interrupt shows it.
    decision = {"decision": "approve", "approval_id": request["approval_id"]}
    try:
        await customer.runs.create(thread["thread_id"], "cliente", command={"resume": decision})
        raise AssertionError("a customer approved their own refund")
    except PermissionDeniedError:
        pass
    decided = await manager.runs.wait(thread["thread_id"], "cliente", command={"resume": decision})
    assert "115,70 €" in decided["messages"][-1]["content"], decided["messages"][-1]
    print("cliente: refund approved by a manager: ok")


asyncio.run(main())
print("langgraph-sdk against mostrador: all checks passed")
