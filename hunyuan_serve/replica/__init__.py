"""One replica: a FastAPI/Uvicorn server around one vLLM async engine."""
