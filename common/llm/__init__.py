"""LLM backends behind one interface: `rules` (offline), later OpenAI-compatible and vLLM."""
