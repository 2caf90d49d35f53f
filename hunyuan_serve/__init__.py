"""hunyuan-serve: Hunyuan-MT as a load-balanced, self-healing translation service."""

__version__ = "0.1.0"
