"""TinyRouter: the incentivized open benchmark for LLM routing."""

__version__ = "0.1.0"
