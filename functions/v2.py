"""The Open Inference Protocol (V2) bodies of a function: a batch in as one input tensor, the
predictions out as one output tensor.

A request's first input tensor, of shape ``[n, ...]``, is ``n`` instances (each a row, nested as
the shape says; a ``BYTES`` tensor of shape ``[n]`` is ``n`` strings, as our text models take
them). Predictions that are numbers or lists of numbers go out as one ``FP32`` (or ``INT64``)
tensor of shape ``[n, ...]``; anything else (a label with its score, a set of boxes) as a
``BYTES`` tensor of ``n`` JSON strings, which a V2 client decodes per row.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from functions.model import InvalidInput

__all__ = ["flatten", "rows", "tensor_shape", "v2_instances", "v2_outputs", "v2_request"]

_NUMERIC = ("FP16", "FP32", "FP64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16",
            "UINT32", "UINT64", "BOOL")  # fmt: skip


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


def v2_instances(body: bytes) -> list[Any]:
    """The instances of a V2 infer body; InvalidInput says what is wrong."""
    return v2_request(body)[0]


def v2_request(body: bytes) -> tuple[list[Any], str | None]:
    """The instances of a V2 infer body and its ``id`` (echoed in the answer, as the protocol
    asks), if it has one; InvalidInput says what is wrong."""
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"body is not JSON: {exc}") from None
    request_id = payload.get("id") if isinstance(payload, dict) else None
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInput(f"id must be a string, got {request_id!r}")
    inputs = payload.get("inputs") if isinstance(payload, dict) else None
    if not isinstance(inputs, list) or not inputs or not isinstance(inputs[0], dict):
        raise InvalidInput("body must be an object with an 'inputs' list of tensors")
    tensor = inputs[0]
    shape, data = tensor.get("shape"), tensor.get("data")
    if not isinstance(shape, list) or not shape or not all(isinstance(d, int) for d in shape):
        raise InvalidInput(f"inputs[0].shape must be a list of integers, got {shape!r}")
    if not isinstance(data, list):
        raise InvalidInput("inputs[0].data must be a flat list")
    if any(isinstance(x, list) for x in data):  # a nested form is allowed by the protocol
        flat: list[Any] = []
        flatten(data, flat)
        data = flat
    if len(data) != math.prod(shape):
        raise InvalidInput(f"inputs[0]: {len(data)} values for shape {shape}")
    if shape[0] < 1:
        raise InvalidInput("inputs[0] holds no instance")
    result: list[Any] = rows(data, shape)
    return result, request_id


def tensor_shape(value: Any) -> list[int]:
    """The shape of a nested list (its first element's, all the way down)."""
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return shape


def v2_outputs(name: str, predictions: list[Any], request_id: str | None = None) -> bytes:
    """The V2 answer for ``predictions`` of model ``name`` (with the request's ``id``, if any)."""
    flat: list[Any] = []
    numeric = True
    for p in predictions:
        stack = [p]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(reversed(item))
            elif isinstance(item, bool | int | float):
                flat.append(item)
            else:
                numeric = False
                break
        if not numeric:
            break
    row = tensor_shape(predictions[0]) if predictions else []
    if numeric and all(tensor_shape(p) == row for p in predictions):
        integer = all(isinstance(x, int) and not isinstance(x, bool) for x in flat)
        tensor = {"name": "output-0", "shape": [len(predictions), *row],
                  "datatype": "INT64" if integer else "FP32", "data": flat}  # fmt: skip
    else:
        data = [orjson.dumps(p, option=orjson.OPT_SERIALIZE_NUMPY).decode() for p in predictions]
        tensor = {"name": "output-0", "shape": [len(predictions)], "datatype": "BYTES",
                  "data": data}  # fmt: skip
    answer: dict[str, Any] = {"model_name": name, "outputs": [tensor]}
    if request_id is not None:
        answer["id"] = request_id
    return orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
