"""The one error a bad checkpoint raises, whatever its format, so callers need catch only one type."""

from __future__ import annotations

import pickle
import struct
import zipfile

__all__ = ["CheckpointError", "UnpicklingError", "ZIP_DAMAGE"]

# What zipfile (and numpy reading from it) raises for a damaged archive: lying offsets and sizes, an unknown
# "version needed", fields that do not unpack. Every reader turns these into a CheckpointError.
ZIP_DAMAGE = (zipfile.BadZipFile, OSError, EOFError, ValueError, OverflowError, NotImplementedError, struct.error)


class CheckpointError(ValueError):
    """A file that is not a checkpoint we can read, or that is truncated, corrupted or hostile.

    A ``ValueError`` because the file's *content* is wrong: nothing was loaded and nothing was executed.
    """


class UnpicklingError(CheckpointError, pickle.UnpicklingError):
    """A torch checkpoint's pickle asked for something a state_dict never needs (e.g. ``os.system``).

    Also a ``pickle.UnpicklingError``, the type ``torch.load(weights_only=True)`` raises for the same file.
    """
