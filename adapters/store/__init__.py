"""Event stores on the eventsourcing library: SQLite, PostgreSQL and in-memory."""
