"""``kn service create`` lines checked by kn's own flag rules (kn 1.x, knative/client).

Only the flags our lines use are known; any other is an error, as a typo would be in kn. The rules
follow kn's flag definitions and parsers:

* integers: ``--scale-min``, ``--scale-max``, ``--scale-init``, ``--scale-target``,
  ``--scale-utilization``, ``--concurrency-limit``, ``--timeout`` (Go's ``strconv.Atoi``: an
  optional sign and digits only, so ``2.5`` and ``85.5`` are refused);
* ``--scale-window``: a Go duration (``60s``, ``1m30s``); ``--scale-metric``: one of the metrics
  the autoscalers know;
* probes (``--probe-readiness``, ``--probe-liveness``): ``http:HOST:PORT:PATH`` or ``https:…``
  (host and port may be empty), ``tcp:HOST:PORT``, ``exec:CMD[,ARG…]``;
* key=value flags, repeatable: ``--env``, ``--annotation-revision``, ``--annotation``,
  ``--label``, ``--node-selector``, ``--request``, ``--limit`` (resources are ``cpu``,
  ``memory`` or an extended resource with a ``/``);
* ``--toleration``: ``Key=…,Operator=…,Value=…,Effect=…[,TolerationSeconds=…]``;
* ``--security-context``: ``none`` or ``strict``; ``--port``: ``[NAME:]PORT``;
* repeatable strings: ``--cmd``, ``--arg``; single strings: ``--image`` (required),
  ``--namespace``.

``--flag value`` and ``--flag=value`` are both accepted; a single-valued flag given twice is an
error (kn keeps the last silently, which hides a mistake).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence

from knative.errors import PlatformError

__all__ = ["KnLineError", "check_kn_args", "check_kn_line"]

_GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_ATOI = re.compile(r"^[+-]?\d+$")
_METRICS = frozenset({"concurrency", "rps", "cpu", "memory"})
_TOLERATION_KEYS = frozenset({"Key", "Operator", "Value", "Effect", "TolerationSeconds"})


class KnLineError(PlatformError, ValueError):
    """A kn line kn itself would refuse; the message names the flag and the value."""


def _integer(value: str) -> str | None:
    return None if _ATOI.match(value) else "must be an integer (kn parses it with Atoi)"


def _duration(value: str) -> str | None:
    return None if _GO_DURATION.match(value) else "must be a Go duration such as 60s or 1m30s"


def _metric(value: str) -> str | None:
    return None if value in _METRICS else f"must be one of {', '.join(sorted(_METRICS))}"


def _pair(value: str) -> str | None:
    key, eq, _ = value.partition("=")
    return None if eq and key else "must be KEY=VALUE"


def _resource(value: str) -> str | None:
    problem = _pair(value)
    if problem:
        return problem
    key = value.partition("=")[0]
    ok = key in ("cpu", "memory", "ephemeral-storage") or "/" in key
    return None if ok else "resource must be cpu, memory, ephemeral-storage or a domain/name"


def _probe(value: str) -> str | None:
    kind, _, rest = value.partition(":")
    if kind in ("http", "https"):
        parts = rest.split(":", 2)
        if len(parts) != 3:
            return "an HTTP probe is http:HOST:PORT:PATH (host and port may be empty)"
        port, path = parts[1], parts[2]
        if port and not port.isdigit():
            return f"probe port must be a number, got {port!r}"
        if not path.startswith("/"):
            return f"probe path must start with /, got {path!r}"
        return None
    if kind == "tcp":
        parts = rest.split(":")
        return None if len(parts) == 2 and parts[1].isdigit() else "a TCP probe is tcp:HOST:PORT"
    if kind == "exec":
        return None if rest else "an exec probe is exec:CMD[,ARG...]"
    return "a probe is http:HOST:PORT:PATH, https:..., tcp:HOST:PORT or exec:CMD"


def _toleration(value: str) -> str | None:
    fields = dict(part.partition("=")[::2] for part in value.split(","))
    unknown = set(fields) - _TOLERATION_KEYS
    if unknown:
        return f"unknown toleration field(s) {', '.join(sorted(unknown))}"
    return None if "Key" in fields or fields.get("Operator") == "Exists" else "needs Key="


def _security(value: str) -> str | None:
    return None if value in ("none", "strict") else "must be none or strict"


def _port(value: str) -> str | None:
    number = value.rpartition(":")[2]
    return None if number.isdigit() and 0 < int(number) < 65536 else "must be [NAME:]PORT"


def _text(value: str) -> str | None:
    return None if value else "must not be empty"


Rule = Callable[[str], "str | None"]
#: flag → (rule, repeatable)
FLAGS: dict[str, tuple[Rule, bool]] = {
    "--image": (_text, False),
    "--namespace": (_text, False),
    "--scale-min": (_integer, False),
    "--scale-max": (_integer, False),
    "--scale-init": (_integer, False),
    "--scale-target": (_integer, False),
    "--scale-utilization": (_integer, False),
    "--scale-window": (_duration, False),
    "--scale-metric": (_metric, False),
    "--concurrency-limit": (_integer, False),
    "--timeout": (_integer, False),
    "--probe-readiness": (_probe, False),
    "--probe-liveness": (_probe, False),
    "--security-context": (_security, False),
    "--port": (_port, False),
    "--env": (_pair, True),
    "--annotation-revision": (_pair, True),
    "--annotation": (_pair, True),
    "--label": (_pair, True),
    "--node-selector": (_pair, True),
    "--request": (_resource, True),
    "--limit": (_resource, True),
    "--toleration": (_toleration, True),
    "--cmd": (_text, True),
    "--arg": (_text, True),
}


def check_kn_args(argv: Sequence[str]) -> None:
    """Raise :class:`KnLineError` naming the first flag kn would refuse in ``argv``."""
    if list(argv[:3]) != ["kn", "service", "create"] or len(argv) < 4:
        raise KnLineError("a line must start with: kn service create NAME")
    name = argv[3]
    if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name) or len(name) > 63:
        raise KnLineError(f"service name {name!r} is not a DNS-1035 label")
    seen: set[str] = set()
    i = 4
    while i < len(argv):
        token = argv[i]
        flag, eq, value = token.partition("=")
        if flag not in FLAGS:
            raise KnLineError(f"{flag}: unknown flag for kn service create")
        if not eq:
            if i + 1 >= len(argv):
                raise KnLineError(f"{flag}: needs a value")
            value = argv[i + 1]
            i += 1
        i += 1
        rule, repeatable = FLAGS[flag]
        if flag in seen and not repeatable:
            raise KnLineError(f"{flag}: given twice (kn would keep only the last)")
        seen.add(flag)
        problem = rule(value)
        if problem:
            raise KnLineError(f"{flag} {value!r}: {problem}")
    if "--image" not in seen:
        raise KnLineError("--image: required")


def check_kn_line(line: str) -> None:
    """The same for a shell line (as ``slackwise manifests`` prints it)."""
    check_kn_args(shlex.split(line))
