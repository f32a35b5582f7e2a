"""The Open Inference Protocol (V2) request of a function: its input tensors, in JSON or as
binary tensor data after a JSON header (the ``binary_data`` extension), and what it asks of the
answer.

A request's first input tensor, of shape ``[n, ...]``, is ``n`` instances (each a row, nested as
the shape says; a ``BYTES`` tensor of shape ``[n]`` is ``n`` strings, as our text models take
them). An input with ``parameters.binary_data_size`` takes its values from the bytes after the
JSON header (whose length the ``Inference-Header-Content-Length`` header gives), in the order of
the inputs. The answer is written by :mod:`functions.v2_answer`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import orjson

from functions.model import InvalidInput
from functions.tensors import DATATYPES, decode_binary

__all__ = ["V2Request", "flatten", "rows", "tensor_shape", "v2_instances", "v2_request"]


def rows(flat: list[Any], shape: list[int]) -> Any:
    """``flat`` (row-major) nested as ``shape`` says; a scalar for an empty shape."""
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    step = math.prod(shape[1:])
    return [rows(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


#: how deeply a tensor's data may nest (an image as nested rows is 4)
MAX_DEPTH = 32


def flatten(value: Any, out: list[Any]) -> None:
    """Append the leaves of a nested list to ``out`` in row-major order (iteratively: a body
    nested deeper than ``MAX_DEPTH`` is refused with InvalidInput, not a RecursionError)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, list):
            out.append(item)
        elif depth >= MAX_DEPTH:
            raise InvalidInput(f"tensor data nests deeper than {MAX_DEPTH} levels")
        else:
            stack.extend((child, depth + 1) for child in reversed(item))


def v2_instances(body: bytes, header_length: str | None = None) -> list[Any]:
    """The instances of a V2 infer body; InvalidInput says what is wrong."""
    return v2_request(body, header_length).instances


@dataclass(frozen=True, slots=True)
class V2Request:
    """What a V2 infer asks: its instances (the first input's rows), its ``id``, the outputs it
    wants (name and whether as binary data; None: all) and ``binary_data_output``."""

    instances: list[Any]
    id: str | None = None
    datatype: str = ""
    shape: tuple[int, ...] = ()
    outputs: tuple[tuple[str, bool], ...] | None = None
    binary_output: bool = False


def _header(body: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    """The JSON part of a body and its binary data (``Inference-Header-Content-Length``)."""
    if header_length is None:
        return body, b""
    try:
        size = int(header_length)
    except ValueError:
        raise InvalidInput(
            f"Inference-Header-Content-Length must be a number of bytes, got {header_length!r}"
        ) from None
    if not 0 < size <= len(body):
        raise InvalidInput(
            f"Inference-Header-Content-Length {size} is past the body's {len(body)} bytes"
        )
    return body[:size], body[size:]


def _payload(head: bytes, binary: bool) -> dict[str, Any]:
    try:
        payload = orjson.loads(head)
    except orjson.JSONDecodeError as exc:
        hint = (
            ""
            if binary
            else (" (binary tensor data needs the Inference-Header-Content-Length header)")
        )
        raise InvalidInput(f"body is not JSON: {exc}{hint}") from None
    if not isinstance(payload, dict):
        raise InvalidInput("body must be an object with an 'inputs' list of tensors")
    return payload


def v2_request(body: bytes, header_length: str | None = None) -> V2Request:
    """What a V2 infer body asks (JSON, or JSON then binary tensor data when
    ``header_length``, the ``Inference-Header-Content-Length`` header, is given);
    InvalidInput says what is wrong."""
    head, data = _header(body, header_length)
    payload = _payload(head, header_length is not None)
    request_id = payload.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInput(f"id must be a string, got {request_id!r}")
    inputs = payload.get("inputs")
    if not isinstance(inputs, list) or not inputs or not all(isinstance(t, dict) for t in inputs):
        raise InvalidInput("body must be an object with an 'inputs' list of tensors")
    tensors = []
    for i, tensor in enumerate(inputs):
        flat, data = _input(tensor, data, f"inputs[{i}]")
        tensors.append(flat)
    if data:
        raise InvalidInput(f"{len(data)} bytes of binary data no input claims")
    shape = [int(d) for d in inputs[0]["shape"]]
    if shape[0] < 1:
        raise InvalidInput("inputs[0] holds no instance")
    parameters = _parameters(payload.get("parameters"), "parameters")
    binary_output = parameters.get("binary_data_output", False)
    if not isinstance(binary_output, bool):
        raise InvalidInput(
            f"parameters.binary_data_output must be true or false, got {binary_output!r}"
        )
    return V2Request(
        instances=rows(tensors[0], shape),
        id=request_id,
        datatype=str(inputs[0]["datatype"]),
        shape=tuple(shape),
        outputs=_requested(payload.get("outputs")),
        binary_output=binary_output,
    )


def _parameters(raw: Any, what: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidInput(f"{what} must be an object, got {raw!r}")
    return raw


def _input(tensor: dict[str, Any], data: bytes, what: str) -> tuple[list[Any], bytes]:
    """One input tensor's flat values, and the binary data after its own."""
    shape, datatype = tensor.get("shape"), tensor.get("datatype")
    if (
        not isinstance(shape, list)
        or not shape
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
    ):
        raise InvalidInput(f"{what}.shape must be a list of sizes, got {shape!r}")
    if datatype not in DATATYPES:
        raise InvalidInput(
            f"{what}.datatype must be one of {', '.join(DATATYPES)}, got {datatype!r}"
        )
    size = _parameters(tensor.get("parameters"), f"{what}.parameters").get("binary_data_size")
    if size is not None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InvalidInput(f"{what}.parameters.binary_data_size must be a size, got {size!r}")
        if size > len(data):
            raise InvalidInput(
                f"{what}.parameters.binary_data_size {size} runs past the body "
                f"({len(data)} bytes of binary data left)"
            )
        try:
            return decode_binary(datatype, shape, data[:size], what), data[size:]
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    values = tensor.get("data")
    if not isinstance(values, list):
        raise InvalidInput(f"{what}.data must be a list (or binary_data_size given)")
    if any(isinstance(x, list) for x in values):  # a nested form is allowed by the protocol
        flat: list[Any] = []
        flatten(values, flat)
        values = flat
    if len(values) != math.prod(shape):
        raise InvalidInput(f"{what}: {len(values)} values for shape {shape}")
    return values, data


def _requested(raw: Any) -> tuple[tuple[str, bool], ...] | None:
    """The outputs a request names, each with whether it wants binary data."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(o, dict) for o in raw):
        raise InvalidInput("outputs must be a list of objects with a name")
    wanted = []
    for i, output in enumerate(raw):
        name = output.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"outputs[{i}].name must be a string, got {name!r}")
        binary = _parameters(output.get("parameters"), f"outputs[{i}].parameters").get(
            "binary_data", False
        )
        if not isinstance(binary, bool):
            raise InvalidInput(f"outputs[{i}].parameters.binary_data must be true or false")
        wanted.append((name, binary))
    return tuple(wanted)


def tensor_shape(value: Any) -> list[int]:
    """The shape of a nested list (its first element's, all the way down)."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape
