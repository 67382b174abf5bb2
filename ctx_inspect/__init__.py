"""ctx-inspect: see, replay and tune the context window of LLM agents."""

__version__ = "0.1.0"
