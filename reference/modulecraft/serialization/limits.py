"""Every count a checkpoint is refused beyond, in one place: the work and memory a file can make a load cost.

Each limit is far above what a real checkpoint needs and is checked by counting, before the work it bounds is
done, so a hostile file is refused within a bound set by its size (see the README's "Checkpoints" for the
numbers measured) rather than by the process running out of time or memory. Every refusal names its limit.
"""

from __future__ import annotations

__all__ = ["NESTING", "DIMENSIONS", "INT64", "PICKLE_BYTES", "OPCODES", "OPCODES_PER_BYTE",
           "OBJECT_BYTES", "OBJECT_BYTES_PER_BYTE", "OBJECT_BYTES_MOST", "TENSORS", "HASHED_NODES",
           "CHOSEN_HASH_NODES", "CONVERTED_ELEMENTS_PER_BYTE", "CONVERTED_ELEMENTS", "HEADER_BYTES", "HEADER_NODES",
           "HEADER_NODES_PER_BYTE", "HEADER_NODES_MOST",
           "MEMBERS", "hash_is_chosen"]

NESTING = 100  # containers inside containers; a training checkpoint nests about 5 deep
DIMENSIONS = 64  # numpy's own limit on a shape's length
INT64 = 2**63  # sizes, strides, offsets and counts are ints below it, checked before any arithmetic on them

# torch's format. A state_dict's pickle holds names and shapes, never values: about 100 bytes, 30 opcodes and 15
# objects per tensor (measured on torch.save files: 0.29 opcodes a byte; an Adam state_dict, its parameter ids
# listed, 0.39). Work and memory are bounded by the bytes read so far: at any opcode, at most a small allowance
# plus so much per byte, so a file that builds more than real ones do is refused as soon as it does, whatever its
# size, and never more than a ceiling. Opcodes bound the time the walk takes; what unpickling and rebuilding builds
# is counted as the memory its objects take (estimated in pickle_scan: both copies of each object, the unpickled
# one and the one returned, and the walk's own records; measured at 0.1-0.9 times the estimate on the costliest
# patterns, 0.5-0.6 on real state_dicts). Real state_dicts come to 34-43 bytes a byte of pickle (an Adam
# state_dict the most) and about 3 kB a tensor; an Adam state_dict of 100,000 tensors (the tensors limit) to
# about 300 MB.
PICKLE_BYTES = 32 * 2**20
OPCODES = 100_000
OPCODES_PER_BYTE = 0.5
OBJECT_BYTES = 8 * 2**20
OBJECT_BYTES_PER_BYTE = 56
OBJECT_BYTES_MOST = 512 * 2**20
TENSORS = 100_000  # also the safetensors limit; tensors are the costliest objects to make

# Hashing. A dict key or set item is hashed node by node (a tuple hashes its items), and a pickle can name one
# tuple many times from its memo, so the nodes hashed are counted unfolded: ``(t, t)`` with ``t = (u, u)`` is 7.
HASHED_NODES = 4_000_000
# A key whose hash a file can choose collides with as many others as the file likes, and each insertion then
# compares it with every earlier one: n such keys cost n**2 / 2 comparisons. Strings and bytes hash with a
# per-process secret, small ints and floats collide at most a few hundred to a value; tuples, frozensets, complex
# numbers and ints of 2**56 or more can be chosen, so their nodes are counted (legitimate checkpoints have none).
CHOSEN_HASH_NODES = 4_000

# Tensors numpy has no type for are widened, and a big-endian file's tensors byte-swapped, each into an array of
# its own: their elements, counted before any is made, are at most 2 per byte of storage plus a million (views of
# one storage may overlap; a stride-0 tensor repeats one element).
CONVERTED_ELEMENTS_PER_BYTE = 2
CONVERTED_ELEMENTS = 2**20

# safetensors and .npz headers are JSON; each value costs Python 30 to 90 bytes, so values are counted (an upper
# bound, from the characters that can start one) before the JSON is parsed: at most a small allowance plus so many
# per byte of header, and never more than a header of 100,000 tensors needs (1.7 million values in 6 MB).
# Headers written by safetensors and modulecraft have 0.18 to 0.33 a byte; 100 MB of ``[]`` would take gigabytes.
HEADER_BYTES = 100 * 2**20  # the limit safetensors itself enforces on the JSON header
HEADER_NODES = 100_000
HEADER_NODES_PER_BYTE = 0.4
HEADER_NODES_MOST = 2_000_000

MEMBERS = TENSORS + 16  # zip members: one per storage (or .npz array) and a few of the format's own

_SMALL_INT = 2**56


def hash_is_chosen(value) -> bool:
    """Whether a file can choose the hash of ``value`` (a key it holds) to collide with many others."""
    if type(value) in (str, bytes, bool, float, type(None)):
        return False
    return type(value) is not int or abs(value) >= _SMALL_INT
