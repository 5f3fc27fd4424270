"""Integrations of Tune with other libraries (`ray_train`: Train runs inside trials)."""
