"""`python -m reference.simulate`: the deterministic simulation of a fit
(reference.train.simulation) on the command line."""
