"""A V2 answer: predictions as output tensors, typed as the model declares them, in JSON or as
binary tensor data as the request asks.

With declared outputs (:attr:`functions.model.Model.outputs`), a record prediction goes out as
one tensor per field (digits: ``label INT64 [n]`` and ``probability FP32 [n]``; a list of
records, such as ImageNet's top five, as ``[n, 5]``), and a plain one as one tensor. A ``BYTES``
output holds a string as it is and anything else (a list of boxes, a value that can be null) as
its JSON. Without declared outputs (another system's model behind the adapter) the types are
read from the predictions: numbers of one shape as one ``INT64`` or ``FP32`` tensor
(``output-0``), records field by field, anything else as JSON strings.

The request picks what comes back (V2's ``outputs``, in its order; unknown names are a 400)
and how: ``binary_data`` per requested output, else ``binary_data_output``, else JSON. With
any binary output the body is the JSON header, then each binary output's bytes in order, and
the header's length is the ``Inference-Header-Content-Length`` header.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from functions.model import InvalidInput
from functions.tensors import TensorSpec, encode_binary
from functions.v2 import V2Request, tensor_shape

__all__ = ["BINARY_HEADER", "chosen", "output_specs", "v2_answer"]

#: the header giving the JSON part's length in a body with binary tensor data
BINARY_HEADER = "inference-header-content-length"
_JSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


def _pick(prediction: Any, field: str | None) -> Any:
    """A field of a record prediction (of each record, for a list of them)."""
    if field is None:
        return prediction
    if isinstance(prediction, dict):
        return prediction.get(field)
    if isinstance(prediction, list):
        return [r.get(field) if isinstance(r, dict) else None for r in prediction]
    return None


def _kind(values: list[Any]) -> str:
    """The datatype of numbers (INT64 or FP32), BYTES for anything else."""
    flat: list[Any] = []
    stack = list(values)
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, bool) or not isinstance(item, int | float):
            return "BYTES"
        else:
            flat.append(item)
    shapes = {tuple(tensor_shape(v)) for v in values}
    if len(shapes) != 1:
        return "BYTES"
    return "INT64" if all(isinstance(x, int) for x in flat) else "FP32"


def output_specs(predictions: list[Any]) -> tuple[TensorSpec, ...]:
    """Outputs read from the predictions, for a model that declares none."""
    if predictions and all(isinstance(p, dict) for p in predictions):
        fields = list(dict.fromkeys(k for p in predictions for k in p))
        specs = []
        for key in fields:
            column = [p.get(key) for p in predictions]
            kind = _kind(column)
            row = tensor_shape(column[0]) if kind != "BYTES" else []
            specs.append(TensorSpec(key, kind, (-1, *row), field=key))
        return tuple(specs)
    kind = _kind(predictions)
    row = tensor_shape(predictions[0]) if kind != "BYTES" and predictions else []
    return (TensorSpec("output-0", kind, (-1, *row)),)


def _column(spec: TensorSpec, predictions: list[Any]) -> tuple[list[int], list[Any]]:
    """The shape and flat values of one output over a batch's predictions."""
    column = [_pick(p, spec.field) for p in predictions]
    if spec.datatype == "BYTES" and len(spec.shape) == 1:  # a row is one string, or JSON
        return [len(column)], [_text(v) for v in column]
    row = tensor_shape(column[0]) if column else []
    flat: list[Any] = []
    for value in column:
        if tensor_shape(value) != row:
            raise ValueError(f"output {spec.name}: rows of different shapes")
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(reversed(item))
            elif spec.datatype == "BYTES":
                flat.append(_text(item))
            elif isinstance(item, bool | int | float):
                flat.append(item)
            else:
                raise ValueError(f"output {spec.name} is {spec.datatype} but holds {item!r}")
    return [len(column), *row], flat


def _text(value: Any) -> str:
    """A BYTES element: a string as it is, anything else as its JSON."""
    return value if isinstance(value, str) else orjson.dumps(value, option=_JSON_OPTIONS).decode()


def chosen(specs: Sequence[TensorSpec], request: V2Request | None) -> list[tuple[TensorSpec, bool]]:
    """The outputs a request gets, each with whether as binary data (InvalidInput for a name
    the model does not answer)."""
    if request is None or request.outputs is None:
        binary = request is not None and request.binary_output
        return [(spec, binary) for spec in specs]
    by_name = {spec.name: spec for spec in specs}
    picked = []
    for name, binary in request.outputs:
        if name not in by_name:
            raise InvalidInput(
                f"no output named {name!r}; the model answers {', '.join(by_name) or 'none'}"
            )
        picked.append((by_name[name], binary or request.binary_output))
    return picked


def v2_answer(
    model: str,
    predictions: list[Any],
    request: V2Request | None = None,
    specs: Sequence[TensorSpec] = (),
) -> tuple[bytes, int | None]:
    """The body of the V2 answer of ``model``'s ``predictions`` to ``request``, and the length
    of its JSON header when it carries binary data (None: the body is all JSON)."""
    outputs = []
    blobs = []
    for spec, binary in chosen(specs or output_specs(predictions), request):
        shape, flat = _column(spec, predictions)
        tensor: dict[str, Any] = {"name": spec.name, "datatype": spec.datatype, "shape": shape}
        if binary:
            blob = encode_binary(spec.datatype, flat)
            tensor["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            tensor["data"] = flat
        outputs.append(tensor)
    answer: dict[str, Any] = {"model_name": model, "outputs": outputs}
    if request is not None and request.id is not None:
        answer["id"] = request.id
    head = orjson.dumps(answer, option=_JSON_OPTIONS)
    if not blobs:
        return head, None
    return head + b"".join(blobs), len(head)
