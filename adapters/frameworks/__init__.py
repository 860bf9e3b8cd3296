"""Framework adapters: the context layer inside LangChain and pydantic-ai agents."""
