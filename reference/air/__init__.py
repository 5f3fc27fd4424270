"""`reference.air`: what Ray keeps under `ray.air` that Train and Tune users still import,
the experiment-tracking integrations (`reference.air.integrations`)."""
