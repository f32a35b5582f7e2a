"""The contract every function implements.

A function is a small class: ``load()`` reads the real weights (timed by the runtime),
``validate()`` turns one request's JSON instances into model inputs or raises
:class:`InvalidInput` with a reason, ``predict()`` runs one batch, and ``healthy()`` says whether
the loaded model can still serve. The runtime (``functions.runtime``) turns it into a Starlette
app; nothing here does I/O beyond reading model files.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

from functions.errors import FunctionsError

if TYPE_CHECKING:
    from functions.tensors import TensorSpec


class InvalidInput(FunctionsError, ValueError):
    """An instance the model cannot take; the message is the reason sent back with HTTP 400."""


class ModelError(FunctionsError, RuntimeError):
    """The model failed on a valid batch; answered with HTTP 500, the process keeps serving."""


class Model(abc.ABC):
    """One inference function. Subclasses set ``kind`` and implement the four methods."""

    #: registry name, e.g. ``"digits"``
    kind: ClassVar[str]
    #: one line for docs and ``slackwise models``
    summary: ClassVar[str] = ""
    #: the largest number of instances one request may carry
    max_instances: ClassVar[int] = 256
    #: the most bytes one instance can take in a request's JSON, whitespace and escapes
    #: included (None: bounded only by the body limit); with ``max_instances`` it bounds a
    #: request's body, so a front end refuses an oversized one from its Content-Length
    max_instance_bytes: ClassVar[int | None] = None
    #: the device families the model's framework can compute on
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    #: the V2 input tensor, a row an instance (text: ``BYTES`` of shape ``[-1]``)
    input: ClassVar[TensorSpec | None] = None
    #: what a prediction holds, as V2 output tensors (one per field of a record prediction);
    #: empty: read from the predictions (:mod:`functions.v2_answer`)
    outputs: ClassVar[tuple[TensorSpec, ...]] = ()

    def __init__(self, *, threads: int = 1, device: str = "cpu") -> None:
        from functions.device import check_device, parse_device

        self.threads = threads
        self.device = parse_device(device)
        check_device(self.kind, self.device, self.devices)

    def check_device(self) -> None:
        """Raise :class:`functions.device.DeviceUnavailable` when the device cannot be used
        here (called before the server starts: a function refuses to start, it never falls
        back to the CPU); models that can use a GPU ask their framework."""
        from functions.device import check_device as supported

        supported(self.kind, self.device, self.devices)

    @abc.abstractmethod
    def load(self) -> None:
        """Read the real model into memory. Called once, before the first request."""

    @abc.abstractmethod
    def validate(self, instance: Any) -> Any:
        """Check and decode one JSON instance; raise InvalidInput with a reason."""

    @abc.abstractmethod
    def predict(self, batch: list[Any]) -> list[Any]:
        """Run one batch of validated instances; return one JSON-able prediction each."""

    def healthy(self) -> bool:
        """Whether the loaded model can serve; the default trusts a successful load."""
        return True

    @abc.abstractmethod
    def sample_instances(self, n: int) -> list[Any]:
        """``n`` real sample instances in the JSON form ``validate`` accepts (for profiles)."""

    def larger_instances(self, n: int, factor: int) -> list[Any] | None:
        """``n`` real instances about ``factor`` times the size of :meth:`sample_instances`'
        (a step change of input size), or None where the model has no larger input to send."""
        return None
