"""Search spaces and search algorithms of `reference.tune`."""
