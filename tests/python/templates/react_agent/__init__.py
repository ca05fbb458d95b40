"""A ReAct agent written as LangGraph's project template writes it: a `Context` dataclass as the
graph's `context_schema`, read by the nodes as `runtime.context`, and a model named
`"provider/model"` loaded with `init_chat_model`."""
