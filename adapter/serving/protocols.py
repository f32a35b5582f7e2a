"""How a batch is written to a function and its answer read back: KServe V1 or the Open Inference
Protocol (V2), chosen per function (``functions.X.upstream.protocol``).

* **V1** (``v1``; our functions, KServe's V1 servers, TF Serving's REST): ``POST
  /v1/models/{model}:predict`` with ``{"instances": [...]}``, answered ``{"predictions": [...]}``
  in the same order.
* **V2** (``v2``; KServe V2, Triton, MLServer, our functions too): ``POST
  /v2/models/{model}/infer`` with one input tensor holding the batch, ``{"inputs": [{"name":
  INPUT, "shape": [n, ...], "datatype": ..., "data": [...]}]}``; the answer's output tensor
  (``OUTPUT``, or the first) is split back into ``n`` rows. The datatype follows the instances:
  ``BYTES`` for strings, ``INT64`` for integers, ``FP32`` otherwise; instances of one batch must
  share a shape (a server refusing a mixed batch is handled by splitting it, see
  :mod:`adapter.serving.rejections`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from functions.tensors import TensorSpec, decode_binary, encode_binary
from functions.v2 import flatten, rows, tensor_shape
from functions.v2_answer import BINARY_HEADER

__all__ = ["PROTOCOLS", "Codec", "codec_for"]

PROTOCOLS = ("v1", "v2")
_Headers = dict[str, str]
_NONE: _Headers = {}


def _datatype(flat: list[Any]) -> str:
    if any(isinstance(x, str) for x in flat):
        return "BYTES"
    if all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        return "INT64"
    if all(isinstance(x, bool) for x in flat):
        return "BOOL"
    return "FP32"


@dataclass(slots=True)
class Codec:
    """One function's protocol: the path to POST to, the body of a batch, its predictions;
    for V2, the outputs the last answer carried (their names and datatypes, which the adapter's
    own V2 answers keep for a model that is not of a kind it knows)."""

    protocol: str = "v1"
    model: str = ""
    input_name: str = "input-0"
    output_name: str | None = None
    #: V2 batches as binary tensor data, their outputs asked for so
    binary: bool = False
    outputs: tuple[TensorSpec, ...] = ()

    @property
    def path(self) -> str:
        if self.protocol == "v2":
            return f"/v2/models/{self.model}/infer"
        return f"/v1/models/{self.model}:predict"

    def encode(self, instances: list[Any], request_id: str | None = None) -> tuple[bytes, _Headers]:
        """The body of a batch and the headers it needs; V2 carries ``request_id`` as its
        ``id`` (optional in the protocol, but servers echo it, and some fail answering a request
        without one)."""
        if self.protocol != "v2":
            return orjson.dumps({"instances": instances}), _NONE
        flat: list[Any] = []
        for instance in instances:
            flatten(instance, flat)
        row = tensor_shape(instances[0]) if instances else []
        datatype = _datatype(flat)
        tensor: dict[str, Any] = {
            "name": self.input_name,
            "shape": [len(instances), *row],
            "datatype": datatype,
        }
        payload: dict[str, Any] = {} if request_id is None else {"id": request_id}
        payload["inputs"] = [tensor]
        if not self.binary:
            tensor["data"] = flat
            return orjson.dumps(payload), _NONE
        blob = encode_binary(datatype, flat)
        tensor["parameters"] = {"binary_data_size": len(blob)}
        payload["parameters"] = {"binary_data_output": True}
        head = orjson.dumps(payload)
        framing = {"content-type": "application/octet-stream", BINARY_HEADER: str(len(head))}
        return head + blob, framing

    def decode(
        self, content: bytes, total: int, headers: Mapping[str, str] | None = None
    ) -> list[Any]:
        """The ``total`` predictions of an answer (ValueError, KeyError or TypeError when it
        is not one); a V2 answer's binary tensor data is read by its ``headers``."""
        if self.protocol != "v2":
            predictions = orjson.loads(content)["predictions"]
        else:
            predictions = self._v2_rows(content, total, headers or {})
        if not isinstance(predictions, list) or len(predictions) != total:
            raise ValueError(f"{len(predictions)} predictions for {total} instances")
        return predictions

    def _v2_rows(self, content: bytes, total: int, headers: Mapping[str, str]) -> list[Any]:
        """One row per instance: the named output's, the only output's, or a record of every
        output's values by name."""
        tensors = output_tensors(content, headers.get(BINARY_HEADER))
        if not tensors:
            raise ValueError("no output tensor in the answer")
        if self.output_name is not None:
            tensors = [t for t in tensors if t[0] == self.output_name] or tensors[:1]
        columns = {}
        many = len(tensors) > 1
        self.outputs = tuple(
            TensorSpec(name, datatype, (-1, *shape[1:]), name if many else None)
            for name, datatype, shape, _ in tensors
        )
        for name, _, shape, flat in tensors:
            if not shape or shape[0] != total:
                raise ValueError(f"output {name} shape {shape} for {total} instances")
            if len(flat) != math.prod(shape):
                raise ValueError(f"{len(flat)} values for output {name} shape {shape}")
            columns[name] = rows(flat, shape) if len(shape) > 1 else flat
        if len(columns) == 1:
            return next(iter(columns.values()))
        return [{name: column[i] for name, column in columns.items()} for i in range(total)]


def output_tensors(
    content: bytes, header_length: str | None
) -> list[tuple[str, str, list[int], list[Any]]]:
    """Each output of a V2 answer (JSON, or a JSON header then binary tensor data): its name,
    datatype, shape and flat values."""
    head, data = (content, b"") if header_length is None else _split(content, header_length)
    found = []
    for tensor in orjson.loads(head)["outputs"]:
        shape = [int(d) for d in tensor["shape"]]
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is None:
            flat = list(tensor["data"])
            if any(isinstance(x, list) for x in flat):
                nested, flat = flat, []
                flatten(nested, flat)
        else:
            if int(size) > len(data):
                raise ValueError(f"output {tensor['name']}: binary data past the answer")
            flat = decode_binary(tensor["datatype"], shape, data[: int(size)], tensor["name"])
            data = data[int(size) :]
        found.append((str(tensor["name"]), str(tensor["datatype"]), shape, flat))
    return found


def _split(content: bytes, header_length: str) -> tuple[bytes, bytes]:
    size = int(header_length)
    if not 0 < size <= len(content):
        raise ValueError(f"Inference-Header-Content-Length {size} past the answer's {len(content)}")
    return content[:size], content[size:]


def codec_for(
    protocol: str,
    model: str,
    *,
    input_name: str = "input-0",
    output_name: str | None = None,
    binary: bool = False,
) -> Codec:
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return Codec(protocol, model, input_name, output_name, binary)
