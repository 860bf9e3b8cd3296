"""Summarizers: the offline extractive default, and model summarizers over HTTP."""
