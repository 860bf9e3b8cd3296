"""Summaries: compaction planning, the worker, the summaries view, clip-archive, lineage and recall."""
