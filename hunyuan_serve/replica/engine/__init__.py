"""vLLM behind one door: the only package of hunyuan_serve that imports vllm or names a VLLM_* variable."""
