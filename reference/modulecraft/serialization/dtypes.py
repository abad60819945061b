"""Element types as the three formats name them, and the exact widening of those numpy lacks.

numpy has no bfloat16, float8 or complex32: a checkpoint's arrays of those types load widened to float32 (or
complex64), which holds every one of their values exactly (NaN and infinities included). torch's bit types
(``bits8``, ``bits16``, ``bits1x8``, ``bits2x4``, ``bits4x2``: raw bits with no arithmetic) load as the unsigned
ints of their size. Everything else loads with its own numpy dtype. One table serves the readers and the writers
of safetensors and torch's format; :data:`UNREAD` says why the few types torch or safetensors can write and
modulecraft cannot read are refused, and what to do.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

__all__ = ["ElementType", "ALL", "UNREAD", "by_torch_name", "by_torch_storage", "by_safetensors_name", "for_numpy"]


class ElementType(NamedTuple):
    """One element type: its names in torch and safetensors, its raw bytes in numpy, and how it loads."""
    torch_name: str                     # "float32": torch.float32 in a pickle
    storage: str | None                 # "FloatStorage": the legacy storage class torch names it by, if any
    safetensors_name: str | None        # "F32"
    raw: np.dtype                       # the little-endian numpy dtype of its stored bytes
    widen: Callable[[np.ndarray], np.ndarray] | None = None  # raw array -> loaded array, when numpy lacks it

    def load(self, raw: np.ndarray) -> np.ndarray:
        """The loaded array for ``raw``, an array of this type's stored bytes (in native byte order)."""
        return self.widen(raw) if self.widen else raw

    @property
    def loaded_dtype(self) -> np.dtype:
        """The numpy dtype arrays of this type load with."""
        return self.load(np.zeros(0, self.raw)).dtype.newbyteorder("=")


def _bfloat16(raw: np.ndarray) -> np.ndarray:
    """bfloat16 is the upper half of a float32: shift it back into place."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


def _float8(exponent_bits: int, bias: int, *, inf: bool = False, nan_is_all_ones: bool = False,
            nan_is_negative_zero: bool = False, signed: bool = True) -> Callable[[np.ndarray], np.ndarray]:
    """A widening to float32 through a table of the 256 values of one float8 layout."""
    mantissa_bits = 8 - exponent_bits - signed
    codes = np.arange(256)
    exponent = (codes >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = codes & ((1 << mantissa_bits) - 1)
    normal = exponent > 0 if mantissa_bits else np.ones(256, bool)  # e8m0 has no subnormals
    significand = np.where(normal, 1.0, 0.0) + mantissa / (1 << mantissa_bits)
    table = np.ldexp(significand, np.where(normal, exponent, 1) - bias)
    if signed:
        table = np.where(codes >> 7, -table, table)
    top = (1 << exponent_bits) - 1
    if inf:  # IEEE-like: an all-ones exponent is infinity (mantissa 0) or NaN
        table = np.where((exponent == top) & (mantissa == 0), np.copysign(np.inf, table), table)
        table = np.where((exponent == top) & (mantissa != 0), np.nan, table)
    if nan_is_all_ones:
        table = np.where((codes & (0x7F if signed else 0xFF)) == (0x7F if signed else 0xFF), np.nan, table)
    if nan_is_negative_zero:
        table = np.where(codes == 0x80, np.nan, table)
    table = table.astype(np.float32)
    return lambda raw: table[raw]


def _complex32(raw: np.ndarray) -> np.ndarray:
    """complex32 is a float16 real part then a float16 imaginary part."""
    widened = np.empty(raw.shape, np.complex64)
    widened.real, widened.imag = raw["real"], raw["imag"]
    return widened


_TYPES = [
    ElementType("float32", "FloatStorage", "F32", np.dtype("<f4")),
    ElementType("float64", "DoubleStorage", "F64", np.dtype("<f8")),
    ElementType("float16", "HalfStorage", "F16", np.dtype("<f2")),
    ElementType("bfloat16", "BFloat16Storage", "BF16", np.dtype("<u2"), _bfloat16),
    ElementType("int64", "LongStorage", "I64", np.dtype("<i8")),
    ElementType("int32", "IntStorage", "I32", np.dtype("<i4")),
    ElementType("int16", "ShortStorage", "I16", np.dtype("<i2")),
    ElementType("int8", "CharStorage", "I8", np.dtype("i1")),
    ElementType("uint8", "ByteStorage", "U8", np.dtype("u1")),
    ElementType("uint16", None, "U16", np.dtype("<u2")),
    ElementType("uint32", None, "U32", np.dtype("<u4")),
    ElementType("uint64", None, "U64", np.dtype("<u8")),
    ElementType("bool", "BoolStorage", "BOOL", np.dtype("?")),
    ElementType("complex64", "ComplexFloatStorage", "C64", np.dtype("<c8")),
    ElementType("complex128", "ComplexDoubleStorage", None, np.dtype("<c16")),
    ElementType("complex32", None, None, np.dtype([("real", "<f2"), ("imag", "<f2")]), _complex32),
    ElementType("float8_e4m3fn", None, "F8_E4M3", np.dtype("u1"), _float8(4, 7, nan_is_all_ones=True)),
    ElementType("float8_e5m2", None, "F8_E5M2", np.dtype("u1"), _float8(5, 15, inf=True)),
    ElementType("float8_e4m3fnuz", None, "F8_E4M3FNUZ", np.dtype("u1"), _float8(4, 8, nan_is_negative_zero=True)),
    ElementType("float8_e5m2fnuz", None, "F8_E5M2FNUZ", np.dtype("u1"), _float8(5, 16, nan_is_negative_zero=True)),
    ElementType("float8_e8m0fnu", None, "F8_E8M0", np.dtype("u1"),
                _float8(8, 127, nan_is_all_ones=True, signed=False)),
    # listed after uint8 and uint16, which are what arrays of those numpy dtypes are written as
    ElementType("bits8", None, None, np.dtype("u1")),
    ElementType("bits16", None, None, np.dtype("<u2")),
    ElementType("bits1x8", None, None, np.dtype("u1")),
    ElementType("bits2x4", None, None, np.dtype("u1")),
    ElementType("bits4x2", None, None, np.dtype("u1")),
]

_PACKED = ("numpy has no such type, and unpacking it would change the tensor's shape; to keep its bytes, save "
           "tensor.view(torch.uint8) instead")
UNREAD = {  # name (torch's or safetensors') -> what it is, and what to do
    "float4_e2m1fn_x2": "two 4-bit floats (e2m1) packed in each byte: " + _PACKED,
    "F4": "4-bit floats (e2m1) packed two to a byte, which safetensors.torch does not write: " + _PACKED,
    **{name: "a quantized integer type: save tensor.dequantize() instead" for name in
       ("qint8", "quint8", "qint32", "quint4x2", "quint2x4")},
}

ALL = tuple(_TYPES)
_BY_TORCH_NAME = {kind.torch_name: kind for kind in _TYPES}
_BY_STORAGE = {kind.storage: kind for kind in _TYPES if kind.storage}
_BY_SAFETENSORS_NAME = {kind.safetensors_name: kind for kind in _TYPES if kind.safetensors_name}
# reversed: of the types stored as one numpy dtype (uint8, bits8, ...), the first listed is the one written
_BY_NUMPY = {kind.raw.newbyteorder("="): kind for kind in reversed(_TYPES) if kind.widen is None}


def by_torch_name(name: str) -> ElementType | None:
    """The type torch calls ``torch.<name>`` (``"float32"``), or None."""
    return _BY_TORCH_NAME.get(name)


def by_torch_storage(name: str) -> ElementType | None:
    """The type of torch's legacy storage class ``torch.<name>`` (``"FloatStorage"``), or None."""
    return _BY_STORAGE.get(name)


def by_safetensors_name(name: str) -> ElementType | None:
    """The type safetensors calls ``name`` (``"F32"``), or None."""
    return _BY_SAFETENSORS_NAME.get(name)


def for_numpy(dtype: np.dtype) -> ElementType | None:
    """The type an array of ``dtype`` is written as, or None if no format has it (e.g. strings)."""
    return _BY_NUMPY.get(dtype.newbyteorder("="))

