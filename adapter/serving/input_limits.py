"""What one predict may carry, decided before its body is parsed.

A function's model says how many instances one request may hold (``Model.max_instances``) and
how many bytes one instance can take in JSON at most (``Model.max_instance_bytes``). Their
product bounds the body: a request whose ``Content-Length`` says more, or whose body grows past
it while it streams, is refused with 413 at once, naming the limit, before a byte of it is
parsed (a 15 MB body of 60,000 digits used to be parsed whole, holding the adapter's loop for
hundreds of milliseconds, and then refused for its deadline). A body under the bound that holds
more instances than the model takes is refused with 400 right after the parse, before it joins
a queue, so it never shares a batch with good requests. An app is held to its first stage's
limits: that is what its body is.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.serving.errors import BadRequest, PayloadTooLarge
from functions.registry import UnknownModel, model_class

__all__ = ["InputLimits"]


@dataclass(frozen=True, slots=True)
class InputLimits:
    """The limits of one predict target (``what``: "function digits", "app img-query")."""

    what: str
    max_instances: int
    max_body_bytes: int
    #: the model's bound on one instance's JSON, when it has one (else the adapter's body limit)
    instance_bytes: int | None = None

    @classmethod
    def of(cls, what: str, kind: str, adapter_max_body: int) -> InputLimits:
        """The limits of a target served by model ``kind`` under the adapter's body limit."""
        try:
            model = model_class(kind)
        except UnknownModel:  # a function of no kind of ours (a V2 server): the adapter's limit
            return cls(what, 2**31, adapter_max_body)
        per = model.max_instance_bytes
        count = model.max_instances
        bound = adapter_max_body if per is None else min(adapter_max_body, per * count)
        return cls(what, count, bound, per)

    def _limit_text(self) -> str:
        per = self.instance_bytes
        if per is None or self.max_body_bytes < per * self.max_instances:
            return f"the limit of {self.max_body_bytes} bytes"
        return (
            f"{self.what}'s limit of {self.max_body_bytes} bytes "
            f"({self.max_instances} instances of at most {self.instance_bytes} bytes)"
        )

    def too_large(self, size: int | None = None) -> PayloadTooLarge:
        """The 413 of a body of ``size`` bytes (from ``Content-Length``), or (None) of one that
        grew past the limit while it streamed."""
        said = "body" if size is None else f"body of {size} bytes"
        return PayloadTooLarge(f"{said} exceeds {self._limit_text()}")

    def check_count(self, count: int) -> None:
        """Raise the 400 of a request of ``count`` instances over the model's limit."""
        if count > self.max_instances:
            raise BadRequest(
                f"{count} instances exceed {self.what}'s limit of {self.max_instances} per request"
            )
