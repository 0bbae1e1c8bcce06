"""gpuscope: a terminal monitor for GPU servers that run LLM inference."""

__version__ = "0.1.0"
