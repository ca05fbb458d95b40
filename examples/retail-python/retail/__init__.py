"""A store-floor and returns assistant for a chain of stores, as a LangGraph graph."""
