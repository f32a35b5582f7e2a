"""Tensors of the Open Inference Protocol (V2): what a model declares it takes and answers, and
the binary tensor data extension's encoding of a tensor's values.

A :class:`TensorSpec` names a tensor, its datatype and its shape (``-1``: any size; the first
dimension is the batch). A model's outputs are declared as specs: a prediction that is a record
(a label with its score) goes out as one tensor per field (``field``), a plain prediction (an
embedding) as one tensor holding it whole (``field`` None).

Binary data (Triton's and KServe's ``binary_data`` extension): a numeric tensor's values are
its elements in row-major order, little-endian, at the datatype's width; a ``BYTES`` tensor's
are each element's length as a 4-byte little-endian integer followed by its bytes.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DATATYPES", "NUMERIC", "TensorSpec", "decode_binary", "encode_binary"]

#: each numeric V2 datatype's little-endian numpy type
_DTYPES = {
    "BOOL": "?",
    "UINT8": "<u1",
    "UINT16": "<u2",
    "UINT32": "<u4",
    "UINT64": "<u8",
    "INT8": "<i1",
    "INT16": "<i2",
    "INT32": "<i4",
    "INT64": "<i8",
    "FP16": "<f2",
    "FP32": "<f4",
    "FP64": "<f8",
}
NUMERIC = tuple(_DTYPES)
DATATYPES = (*NUMERIC, "BYTES")
_LENGTH = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """One tensor a model takes or answers (``shape`` with ``-1`` where any size goes)."""

    name: str
    datatype: str
    shape: tuple[int, ...] = (-1,)
    #: the field of a record prediction this output holds (None: the prediction itself)
    field: str | None = None
    #: an input of ``BYTES`` whose elements are records as JSON (a question with its
    #: candidates, an image with its box), not text
    records: bool = False

    def metadata(self) -> dict[str, Any]:
        """The tensor as V2's model metadata lists it."""
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}

    def takes(self, datatype: str) -> bool:
        """Whether an input of ``datatype`` fits this input (any numeric type where the model
        takes numbers: it computes in its own; strings only where it takes strings)."""
        if self.datatype == "BYTES":
            return datatype == "BYTES"
        return datatype in NUMERIC

    def fits(self, shape: list[int]) -> bool:
        """Whether a tensor of ``shape`` fits this one's (``-1`` matches any size)."""
        return len(shape) == len(self.shape) and all(
            want in (-1, got) for want, got in zip(self.shape, shape, strict=True)
        )


def decode_binary(datatype: str, shape: list[int], raw: bytes, what: str) -> list[Any]:
    """The elements of a tensor sent as binary data, flat (ValueError names ``what`` when
    ``raw`` does not hold exactly ``shape``'s elements of ``datatype``: the request's parser
    answers it as invalid input)."""
    count = math.prod(shape)
    if datatype == "BYTES":
        return _bytes_elements(raw, count, what)
    dtype = np.dtype(_DTYPES[datatype])
    if len(raw) != count * dtype.itemsize:
        raise ValueError(
            f"{what}: {len(raw)} bytes of binary data for shape {shape} of {datatype} "
            f"({count * dtype.itemsize} expected)"
        )
    values: list[Any] = np.frombuffer(raw, dtype=dtype).tolist()
    return values


def _bytes_elements(raw: bytes, count: int, what: str) -> list[Any]:
    out: list[Any] = []
    at = 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise ValueError(f"{what}: a BYTES element's length runs past its binary data")
        (size,) = _LENGTH.unpack_from(raw, at)
        at += 4
        if at + size > len(raw):
            raise ValueError(f"{what}: a BYTES element of {size} bytes runs past its data")
        chunk = raw[at : at + size]
        at += size
        try:
            out.append(chunk.decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"{what}: BYTES element {len(out)} is not UTF-8 text") from None
    if len(out) != count:
        raise ValueError(f"{what}: {len(out)} BYTES elements for {count} in its shape")
    return out


def encode_binary(datatype: str, flat: list[Any]) -> bytes:
    """``flat``'s elements as binary data of ``datatype`` (strings as UTF-8 for ``BYTES``)."""
    if datatype == "BYTES":
        parts = []
        for value in flat:
            data = value if isinstance(value, bytes) else str(value).encode("utf-8")
            parts.append(_LENGTH.pack(len(data)))
            parts.append(data)
        return b"".join(parts)
    return np.asarray(flat, dtype=_DTYPES[datatype]).tobytes()
