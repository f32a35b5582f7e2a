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
from dataclasses import dataclass
from typing import Any

import orjson

from functions.v2 import flatten, rows, tensor_shape

__all__ = ["PROTOCOLS", "Codec", "codec_for"]

PROTOCOLS = ("v1", "v2")


def _datatype(flat: list[Any]) -> str:
    if any(isinstance(x, str) for x in flat):
        return "BYTES"
    if all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        return "INT64"
    if all(isinstance(x, bool) for x in flat):
        return "BOOL"
    return "FP32"


@dataclass(frozen=True, slots=True)
class Codec:
    """One function's protocol: the path to POST to, the body of a batch, its predictions."""

    protocol: str = "v1"
    model: str = ""
    input_name: str = "input-0"
    output_name: str | None = None

    @property
    def path(self) -> str:
        if self.protocol == "v2":
            return f"/v2/models/{self.model}/infer"
        return f"/v1/models/{self.model}:predict"

    def encode(self, instances: list[Any], request_id: str | None = None) -> bytes:
        """The body of a batch; V2 carries ``request_id`` as its ``id`` (optional in the
        protocol, but servers echo it, and some fail answering a request without one)."""
        if self.protocol != "v2":
            return orjson.dumps({"instances": instances})
        flat: list[Any] = []
        for instance in instances:
            flatten(instance, flat)
        row = tensor_shape(instances[0]) if instances else []
        tensor = {
            "name": self.input_name,
            "shape": [len(instances), *row],
            "datatype": _datatype(flat),
            "data": flat,
        }
        if request_id is None:
            return orjson.dumps({"inputs": [tensor]})
        return orjson.dumps({"id": request_id, "inputs": [tensor]})

    def decode(self, content: bytes, total: int) -> list[Any]:
        """The ``total`` predictions of an answer (ValueError, KeyError or TypeError when it
        is not one)."""
        answer = orjson.loads(content)
        if self.protocol != "v2":
            predictions = answer["predictions"]
        else:
            outputs = answer["outputs"]
            chosen = [o for o in outputs if o.get("name") == self.output_name] or outputs[:1]
            if not chosen:
                raise ValueError("no output tensor in the answer")
            tensor = chosen[0]
            shape = [int(d) for d in tensor["shape"]]
            if not shape or shape[0] != total:
                raise ValueError(f"output shape {shape} for {total} instances")
            flat = list(tensor["data"])
            if len(flat) != math.prod(shape):
                raise ValueError(f"{len(flat)} values for output shape {shape}")
            predictions = rows(flat, shape)
        if not isinstance(predictions, list) or len(predictions) != total:
            raise ValueError(f"{len(predictions)} predictions for {total} instances")
        return predictions


def codec_for(protocol: str, model: str, *, input_name: str = "input-0",
              output_name: str | None = None) -> Codec:  # fmt: skip
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return Codec(protocol, model, input_name, output_name)
