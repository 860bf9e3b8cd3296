"""Provider SDK shapes for the agent-loop API: request arguments and replies of OpenAI and Anthropic."""
