"""The inspector: one self-contained HTML report of what the model saw, call by call, and why."""
