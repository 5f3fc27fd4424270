"""What every history of a fit must satisfy, whoever produced it.

A history is a journal: a list of event dicts, written by the conformance suite's probe
(`conformance/probe.py`) on a real cluster, and built by the reference's deterministic
simulation (`reference.train.simulation`) from a simulated fit. The checkers in `journal`
judge either the same way. This package imports neither `reference`, `simcluster` nor
`conformance` (an import-linter contract), so that both sides can use it without the
suite depending on the implementation it checks, or the reference on the suite.
"""
