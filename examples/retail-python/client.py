"""Drive the retail assistant with the official LangGraph SDK, as an app would, and check it.

A customer asks about stock (streamed token by token), then asks for two refunds; each stops at
the refund tool's `interrupt()`, the thread shows the pending question, and a manager resumes it
with `Command(resume=...)`: the first approved, the second declined. Every step is checked: the
script exits non-zero at the first answer that is not the expected one.

    python client.py --url http://127.0.0.1:2024                       # langgraph dev
    python client.py --url http://127.0.0.1:8123 \\
        --header "Authorization: Bearer $CUSTOMER" --manager-header "Authorization: Bearer $MANAGER"
"""

import argparse
import asyncio
import sys
from typing import Any

from langgraph_sdk import get_client

GRAPH = "retail"


def expect(ok: bool, what: str, got: Any = None) -> None:
    if not ok:
        detail = f"\n  got: {got!r}" if got is not None else ""
        print(f"\nFAILED: {what}{detail}", file=sys.stderr)
        sys.exit(1)


def headers(values: list[str]) -> dict[str, str]:
    pairs = [value.split(":", 1) for value in values]
    return {name.strip(): value.strip() for name, value in pairs}


def tool_calls(message: dict[str, Any]) -> list[str]:
    return [call["name"] for call in message.get("tool_calls") or []]


async def ask_stock(client: Any, thread_id: str) -> None:
    question = "¿Quedan zapatillas de trail Cumbre 42?"
    print(f"cliente> {question}\nasistente> ", end="", flush=True)
    tokens, nodes, calls, last_values = [], [], [], None
    async for part in client.runs.stream(
        thread_id,
        GRAPH,
        input={"messages": [{"role": "user", "content": question}]},
        stream_mode=["messages-tuple", "updates", "values"],
    ):
        if part.event == "messages":
            chunk, metadata = part.data
            if metadata.get("langgraph_node") == "agent" and chunk.get("content"):
                tokens.append(chunk["content"])
                print(chunk["content"], end="", flush=True)
        elif part.event == "updates":
            for node, update in part.data.items():
                nodes.append(node)
                for message in (update or {}).get("messages", []):
                    calls += tool_calls(message)
        elif part.event == "values":
            last_values = part.data
        elif part.event == "error":
            expect(False, "the stock question ran without error", part.data)
    print()
    answer = last_values["messages"][-1]["content"] if last_values else ""
    expected_nodes = ["agent", "tools", "agent", "tools", "agent"]
    expect(nodes == expected_nodes, "agent ⇄ tools twice, then the answer", nodes)
    expect(calls == ["search_products", "check_stock"], "the model searched, then checked stock", calls)
    expect(answer == "".join(tokens), "the streamed tokens are the final answer", (tokens, answer))
    expect("madrid-centro: 3" in answer and "valencia-puerto: 5" in answer, "stock per store", answer)


async def ask_refund(client: Any, thread_id: str, order_id: str, amount: float) -> None:
    """Asks for a refund of `amount`, which stops at the refund tool's interrupt."""
    request = f"Quiero devolver el pedido {order_id}: no me queda bien."
    print(f"cliente> {request}")
    interrupts = []
    async for part in client.runs.stream(
        thread_id,
        GRAPH,
        input={"messages": [{"role": "user", "content": request}]},
        stream_mode="updates",
    ):
        if part.event == "updates" and "__interrupt__" in part.data:
            interrupts += part.data["__interrupt__"]
        elif part.event == "error":
            expect(False, "the refund request ran without error", part.data)
    expect(len(interrupts) == 1, "the run stopped at one interrupt", interrupts)
    question = interrupts[0]["value"]
    expected = {
        "type": "refund_approval", "order_id": order_id, "store_id": "madrid-centro", "amount": amount
    }
    expect(question | expected == question, f"the interrupt asks for {amount} € of {order_id}", question)

    # What a manager's screen reads: the thread waits, and says for what.
    thread = await client.threads.get(thread_id)
    expect(thread["status"] == "interrupted", "the thread is interrupted", thread["status"])
    state = await client.threads.get_state(thread_id)
    expect(state["next"] == ["tools"], "the thread waits in the tools node", state["next"])
    pending = [i for task in state["tasks"] for i in task["interrupts"]]
    expect([i["value"] for i in pending] == [question], "the state shows the pending question", pending)
    proposal = tool_calls(state["values"]["messages"][-1])
    expect(proposal == ["propose_refund"], "the last message proposes the refund", proposal)
    print(f"  (esperando a un encargado: {question['question']})")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:2024")
    parser.add_argument(
        "--header", action="append", default=[], help="the customer's: 'Authorization: Bearer …'"
    )
    parser.add_argument(
        "--manager-header", action="append", default=None, help="the manager's (else the customer's)"
    )
    args = parser.parse_args()
    customer = get_client(url=args.url, headers=headers(args.header))
    manager = get_client(url=args.url, headers=headers(args.manager_header or args.header))

    thread = await customer.threads.create(metadata={"example": "retail"})
    thread_id = thread["thread_id"]
    print(f"thread {thread_id}\n")

    await ask_stock(customer, thread_id)

    # A refund the manager approves, for less than proposed (a used box): resumed with runs.wait.
    await ask_refund(customer, thread_id, "P-1001", 89.9)
    values = await manager.runs.wait(
        thread_id, GRAPH, command={"resume": {"approved": True, "amount": 80.0, "note": "caja dañada"}}
    )
    answer = values["messages"][-1]["content"]
    print(f"encargado> aprobado (80 €)\nasistente> {answer}")
    expected = "Reembolso aprobado: 80,00 € del pedido P-1001 (referencia RE-P-1001)."
    expect(answer == expected, "the refund done, for what the manager approved", answer)

    # A refund the manager declines: resumed with a stream of the answer's tokens.
    await ask_refund(customer, thread_id, "P-1002", 59.9)
    print("encargado> rechazado\nasistente> ", end="", flush=True)
    tokens = []
    async for part in manager.runs.stream(
        thread_id,
        GRAPH,
        command={"resume": {"approved": False, "note": "la prenda está usada"}},
        stream_mode="messages-tuple",
    ):
        if part.event == "messages" and part.data[1].get("langgraph_node") == "agent":
            tokens.append(part.data[0].get("content") or "")
            print(tokens[-1], end="", flush=True)
    print()
    expected = (
        "El encargado no ha aprobado el reembolso del pedido P-1002. Motivo: la prenda está usada."
    )
    expect("".join(tokens) == expected, "the refund declined, and said so", "".join(tokens))

    state = await customer.threads.get_state(thread_id)
    messages = state["values"]["messages"]
    expect(state["next"] == [] and not state["tasks"], "nothing pending at the end", state["next"])
    expect(len(messages) == 18, "18 messages: three turns of six", len(messages))
    last = messages[-1]["content"]
    expect(last == expected, "the last message is the last answer", last)
    thread = await customer.threads.get(thread_id)
    expect(thread["status"] == "idle", "the thread is idle", thread["status"])
    print("\nok: stock answered, one refund approved, one declined")


if __name__ == "__main__":
    asyncio.run(main())
