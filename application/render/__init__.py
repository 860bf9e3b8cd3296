"""Rendering: the budgeted context of a session, its counted reader, context rows and versions."""
