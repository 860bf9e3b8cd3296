"""Wire formats: OpenAI Chat Completions and Anthropic Messages payloads."""
