"""Differential tests: the same scenarios on torch.nn (the oracle) and modulecraft.nn, compared."""
