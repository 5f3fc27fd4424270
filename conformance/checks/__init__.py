"""The checks, one module per area of the contract (see conformance/_clauses/)."""
