"""The differentiable operations, one file per family; each registers itself in ``registry``."""
