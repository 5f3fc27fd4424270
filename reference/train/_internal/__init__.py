"""Internals of `reference.train`: nothing here is public API."""
