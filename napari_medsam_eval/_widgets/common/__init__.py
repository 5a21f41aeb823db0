"""Shared parts of the three docks: layout, layers, words, theme, shortcuts, the worker glue."""
