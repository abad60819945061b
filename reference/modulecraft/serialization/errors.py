"""The one error a bad checkpoint raises, whatever its format, so callers need catch only one type."""

from __future__ import annotations

import pickle

__all__ = ["CheckpointError", "UnpicklingError"]


class CheckpointError(ValueError):
    """A file that is not a checkpoint we can read, or that is truncated, corrupted or hostile.

    A ``ValueError`` because the file's *content* is wrong: nothing was loaded and nothing was executed.
    """


class UnpicklingError(CheckpointError, pickle.UnpicklingError):
    """A torch checkpoint's pickle asked for something a state_dict never needs (e.g. ``os.system``).

    Also a ``pickle.UnpicklingError``, the type ``torch.load(weights_only=True)`` raises for the same file.
    """
