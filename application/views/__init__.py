"""Checkpointed views: the catch-up runner over store notifications, side-stream views, token rows."""
