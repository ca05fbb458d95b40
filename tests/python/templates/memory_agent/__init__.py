"""A memory agent written as LangGraph's memory template writes it: memories kept in the store
per user (`runtime.store`, `get_store()`), the user named by the run's context."""
