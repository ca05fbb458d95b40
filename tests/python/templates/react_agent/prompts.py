"""The agent's default prompts."""

SYSTEM_PROMPT = """You are a helpful AI assistant.

Answer the user's questions with the tools you have."""
