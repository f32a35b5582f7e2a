"""Failures the in-memory API server answers on request (a test double's, see
:mod:`tests.kube.fake_api`): a 403 or any status on a kind, an object or a method, as
``Status`` objects with Kubernetes' codes and reasons."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.responses import JSONResponse


@dataclass(frozen=True)
class _Failure:
    status: int
    reason: str
    message: str


def _status(code: int, reason: str, message: str, name: str = "", kind: str = "") -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"name": name, "kind": kind},
        "code": code,
    }
    return JSONResponse(body, status_code=code)


class Faults:
    """The injected failures (mixed into the fake API server)."""

    _failures: dict[tuple[str, str | None, str | None], _Failure]

    def forbid(self, plural: str, *, name: str | None = None, method: str | None = None) -> None:
        """Answer 403 Forbidden to ``method`` (all when None) on ``plural`` (``name`` or all)."""
        verb = (method or "*").lower()
        message = (
            f'{plural} "{name or "*"}" is forbidden: User "system:serviceaccount:test:slackwise"'
            f' cannot {verb} resource "{plural}" in the namespace'
        )
        self._failures[(plural, name, method)] = _Failure(403, "Forbidden", message)

    def fail(self, plural: str, status: int, reason: str, message: str, **where: str) -> None:
        """Answer ``status`` to requests on ``plural`` (``name=`` and ``method=`` narrow it)."""
        key = (plural, where.get("name"), where.get("method"))
        self._failures[key] = _Failure(status, reason, message)

    def _injected(self, plural: str, name: str | None, method: str) -> JSONResponse | None:
        for key in ((plural, name, method), (plural, name, None), (plural, None, method)):
            failure = self._failures.get(key)
            if failure is not None:
                return _status(failure.status, failure.reason, failure.message, name or "", plural)
        failure = self._failures.get((plural, None, None))
        if failure is not None:
            return _status(failure.status, failure.reason, failure.message, name or "", plural)
        return None
