"""How a run's LangGraph v3 events are shaped for the thread-centric stream protocol (the same
shapes `tests/python` compares with the official server's)."""

from mostrador_runner.thread_events import Shaper, state


def event(method: str, namespace: list[str], data: object, **params: object) -> dict:
    return {"type": "event", "method": method, "params": {"namespace": namespace, "timestamp": 1, "data": data, **params}}


def shaped(events: list[dict], *, finish: bool = False) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    shaper = Shaper("run1", "parent", lambda name, payload: out.append((name, payload)))
    for item in events:
        shaper.take(item)
    if finish:
        shaper.finish()
    return out


def test_a_subgraphs_lifecycle_is_on_its_own_namespace_and_ends_when_its_node_reports() -> None:
    child = ["child:t1"]
    out = shaped(
        [
            event("lifecycle", [], {"event": "started", "namespace": child, "graph_name": "child"}),
            event("lifecycle", [], {"event": "started", "namespace": child, "graph_name": "child"}),
            event("updates", [], {"child": {"value": 1}}),
        ]
    )
    assert [(name, payload["data"].get("event")) for name, payload in out] == [
        ("lifecycle|child:t1", "started"),
        ("updates", None),
        ("lifecycle|child:t1", "completed"),
    ]
    assert out[1][1]["node"] == "child"
    assert out[2][1]["event_id"] == "synth:run1:lc|child:t1|completed"


def test_an_interrupt_is_requested_once_and_interrupts_the_root() -> None:
    interrupt = {"id": "i1", "value": {"question": "ok?"}}
    out = shaped([event("values", [], {"x": 1}, interrupts=[interrupt]), event("values", [], {"x": 1, "__interrupt__": [interrupt]})])
    assert [name for name, _ in out] == ["input.requested", "lifecycle", "values", "values"]
    assert out[0][1]["data"] == {"interrupt_id": "i1", "payload": {"question": "ok?"}}
    assert out[1][1]["data"] == {"event": "interrupted", "graph_name": "parent"}
    assert out[3][1]["data"] == {"x": 1}, "no __interrupt__ in a state"


def test_subgraphs_still_open_when_the_run_ends_complete_deepest_first() -> None:
    out = shaped([event("values", ["a:1", "b:2"], {})], finish=True)
    assert [name for name, _ in out] == ["values|a:1|b:2", "lifecycle|a:1|b:2", "lifecycle|a:1"]


def test_messages_in_a_state_take_the_protocols_shape() -> None:
    ai = {
        "type": "ai",
        "content": ["Hi", {"type": "image_url", "image_url": {"url": "u"}}],
        "id": "m1",
        "response_metadata": {},
        "additional_kwargs": {},
        "tool_calls": [{"name": "f", "args": '{"a": 1}', "id": "c1"}, {"name": "g", "args": "{bad", "id": "c2"}],
    }
    assert state({"messages": [ai]}) == {
        "messages": [
            {
                "type": "ai",
                "content": [{"type": "text", "text": "Hi"}, {"type": "image", "url": "u"}],
                "id": "m1",
                "tool_calls": [{"type": "tool_call", "name": "f", "args": {"a": 1}, "id": "c1"}],
                "invalid_tool_calls": [{"type": "invalid_tool_call", "name": "g", "error": "Malformed args.", "id": "c2", "args": "{bad"}],
            }
        ]
    }
