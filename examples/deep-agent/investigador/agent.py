"""A deep agent served by mostrador: `create_deep_agent` with a subagent, the to-do list, file
tools and code execution, whose files live in mostrador (Postgres, per thread) and whose
commands run in mostrador's sandbox.

It runs offline: `Guion` is a chat model that follows a script, deciding its next tool call from
the conversation alone (never from a counter), so a run resumed on another worker goes on where
it was. Swap it for a real model (`init_chat_model(...)`) and nothing else changes.

What the user asks decides the script (the last user message):

* anything else: plan (to-do list), write `/ventas.csv`, delegate to the `analista` subagent, which
  runs Python in the sandbox to total it and write `/informe.md`, then answer with its result
  (with `; ejecuta: <command>` at its end, the subagent runs that command instead);
* `lee <path>`: read a file; `escribe <path> <text>`: write one;
* `recuerda <text>`: keep a note in `/memories/notas.md` (the owner's memories, shared by their
  threads); `qué recuerdas`: read it;
* `datos grandes`: make a 10 MB binary file in the sandbox;
* `delega dos`: two delegations at once, each running `sleep 1` in the sandbox;
* with `despacio` in it, the analysis takes four seconds more in the sandbox;
* `ejecuta <command>`: run a command in the sandbox.
"""

import json
from typing import Any

from deepagents import create_deep_agent
from langchain.agents.middleware import TodoListMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from mostrador.deepagents import SubagentLimit, backend

VENTAS = "tienda,importe\nmadrid-centro,120.50\nsevilla-triana,80.25\nmadrid-centro,99.25\n"

SUMA = (
    "python3 -c \"import csv; rows = list(csv.DictReader(open('/ventas.csv'))); "
    "total = sum(float(r['importe']) for r in rows); "
    "open('/informe.md', 'w').write(f'# Informe\\n\\nTotal: {total:.2f} EUR en {len(rows)} ventas\\n'); "
    "print(f'total={total:.2f}')\" && cat /informe.md"
)

GRANDE = "python3 -c \"import os; open('/datos.bin', 'wb').write(os.urandom(10 * 1024 * 1024))\" && ls -l /datos.bin"


def _call(name: str, args: dict, n: int) -> dict:
    return {"name": name, "args": args, "id": f"call_{name}_{n}", "type": "tool_call"}


class Guion(BaseChatModel):
    """A scripted chat model: the next step of the script, read off the conversation."""

    @property
    def _llm_type(self) -> str:
        return "guion"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "Guion":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        system = " ".join(str(m.content) for m in messages if isinstance(m, SystemMessage))
        message = self._analista(messages) if "ANALISTA" in system else self._principal(messages)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _analista(self, messages: list[BaseMessage]) -> AIMessage:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        if not done:
            encargo = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
            # "... ejecuta: <command>" names the command; else it totals the sales (slowly if asked).
            if "ejecuta: " in encargo:
                command = encargo.split("ejecuta: ", 1)[1]
            else:
                command = ("sleep 4 && " if "despacio" in encargo else "") + SUMA
            return AIMessage(content="", tool_calls=[_call("execute", {"command": command}, 1)])
        return AIMessage(content=f"Hecho. {_text(done[-1])}")

    def _principal(self, messages: list[BaseMessage]) -> AIMessage:
        asked = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
        # The tool results since the user asked.
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        done = [m for m in messages[last_human:] if isinstance(m, ToolMessage)]
        step = len({m.tool_call_id for m in done})
        if done and (step >= _steps(asked)):
            return AIMessage(content=_text(done[-1]))
        if asked.startswith("lee "):
            return AIMessage(content="", tool_calls=[_call("read_file", {"file_path": asked[4:].strip()}, 1)])
        if asked.startswith("escribe "):
            _, path, text = asked.split(" ", 2)
            return AIMessage(content="", tool_calls=[_call("write_file", {"file_path": path, "content": text}, 1)])
        if asked.startswith("recuerda "):
            nota = asked[len("recuerda ") :]
            return AIMessage(content="", tool_calls=[_call("write_file", {"file_path": "/memories/notas.md", "content": nota}, 1)])
        if asked.startswith("qué recuerdas"):
            return AIMessage(content="", tool_calls=[_call("read_file", {"file_path": "/memories/notas.md"}, 1)])
        if asked.startswith("datos grandes"):
            return AIMessage(content="", tool_calls=[_call("execute", {"command": GRANDE}, 1)])
        if asked.startswith("ejecuta "):
            return AIMessage(content="", tool_calls=[_call("execute", {"command": asked[len("ejecuta ") :]}, 1)])
        if asked.startswith("delega dos"):
            calls = [
                _call("task", {"description": f"ANALISTA ejecuta: sleep 1 && echo {n}", "subagent_type": "analista"}, n)
                for n in (1, 2)
            ]
            return AIMessage(content="", tool_calls=calls)
        if step == 0:
            todos = [
                {"content": "Guardar las ventas en /ventas.csv", "status": "in_progress"},
                {"content": "Pedir al analista el total", "status": "pending"},
            ]
            return AIMessage(
                content="",
                tool_calls=[
                    _call("write_todos", {"todos": todos}, 1),
                    _call("write_file", {"file_path": "/ventas.csv", "content": VENTAS}, 1),
                ],
            )
        encargo = "ANALISTA: suma la columna importe de /ventas.csv con Python y escribe /informe.md"
        if "despacio" in asked:
            encargo += ", despacio"
        return AIMessage(content="", tool_calls=[_call("task", {"description": encargo, "subagent_type": "analista"}, 1)])


def _steps(asked: str) -> int:
    """How many tool calls the script makes for this request before it answers."""
    simple = ("lee ", "escribe ", "recuerda ", "qué recuerdas", "datos grandes", "ejecuta ")
    if asked.startswith("delega dos"):
        return 2
    return 1 if asked.startswith(simple) else 3


def _text(message: ToolMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


agent = create_deep_agent(
    model=Guion(),
    system_prompt="Eres un investigador de ventas de una cadena de tiendas.",
    backend=backend(),
    middleware=[TodoListMiddleware(), SubagentLimit()],
    subagents=[
        {
            "name": "analista",
            "description": "Calcula cifras de ventas ejecutando Python sobre los ficheros.",
            "system_prompt": "ANALISTA: calculas con Python en el sandbox y escribes el informe.",
            "model": Guion(),
            "middleware": [TodoListMiddleware()],
        }
    ],
)
