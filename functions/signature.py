"""What a model kind takes and answers by the Open Inference Protocol (V2), and the checks a V2
request gets against it before it is queued.

The input is one tensor, a row an instance, as the model declares it
(:attr:`functions.model.Model.input`): numbers (digits: ``FP32 [-1, 64]``; any numeric datatype
is taken, the model computes in its own), or ``BYTES`` of shape ``[-1]`` (text as it is; where
the model's instances are records, such as a question with its candidates, each element is the
record's JSON). The outputs are the model's declared ones (:attr:`functions.model.Model.outputs`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import orjson

from functions.model import InvalidInput
from functions.registry import KINDS, model_class
from functions.tensors import TensorSpec
from functions.v2 import V2Request
from functions.v2_answer import chosen

__all__ = ["Signature", "signature"]


@dataclass(frozen=True, slots=True)
class Signature:
    """A model's V2 input and outputs; ``records``: its ``BYTES`` rows are JSON records."""

    input: TensorSpec
    outputs: tuple[TensorSpec, ...]
    records: bool = False

    def metadata(self, name: str, platform: str) -> dict[str, Any]:
        """V2's model metadata (``GET /v2/models/{name}``)."""
        return {
            "name": name,
            "versions": [],
            "platform": platform,
            "inputs": [self.input.metadata()],
            "outputs": [spec.metadata() for spec in self.outputs],
        }

    def instances(self, request: V2Request) -> list[Any]:
        """The request's instances, checked against the input and outputs (InvalidInput says
        what does not fit: the datatype, the shape, an output the model does not answer)."""
        spec = self.input
        if not spec.takes(request.datatype):
            raise InvalidInput(
                f"inputs[0].datatype {request.datatype} is not one this model takes "
                f"({spec.datatype}{' or another numeric type' if spec.datatype != 'BYTES' else ''})"
            )
        if not spec.fits(list(request.shape)):
            raise InvalidInput(
                f"inputs[0].shape {list(request.shape)} does not fit the model's {list(spec.shape)}"
            )
        chosen(self.outputs, request)  # an unknown output is a 400 now, not after the batch
        if not self.records:
            return request.instances
        out = []
        for i, row in enumerate(request.instances):
            if not isinstance(row, str):  # a record written into the JSON data as it is
                out.append(row)
                continue
            try:
                out.append(orjson.loads(row))
            except orjson.JSONDecodeError as exc:
                raise InvalidInput(f"inputs[0] element {i} is not a JSON record: {exc}") from None
        return out


@functools.cache
def signature(kind: str | None) -> Signature | None:
    """The V2 signature of model ``kind`` (None for a kind this build does not know, or one
    that declares no input: another system's model, whose shapes are its own). Read from the
    model's class, so an adapter without the model's packages knows it too."""
    if kind is None or kind not in KINDS:
        return None
    cls = model_class(kind)
    if cls.input is None:
        return None
    return Signature(cls.input, cls.outputs, cls.input.records)
