"""Reducers of the render pipeline, run cheap to expensive."""
