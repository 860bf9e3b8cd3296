"""Rebuilds: the projection runner, blue/green versions, the what-if simulator and view sets."""
