"""One of our model classes served by KServe's own ModelServer (V1 protocol, no batching).

Run by ``benchmarks/peers.py`` with the throwaway venv's Python, where ``kserve`` is installed
(it is not a dependency of this project): ``python benchmarks/kserve_server.py --model digits
--port 8080``. The model is the very class our functions serve (``functions.registry``), loaded
once, validated and run per request exactly as our runtime does; only the server around it is
KServe's.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))

    import kserve  # only in the benchmark's own venv

    from functions.model import InvalidInput
    from functions.registry import create_model

    class Served(kserve.Model):  # type: ignore[misc]
        def __init__(self, name: str) -> None:
            super().__init__(name)
            self.inner = create_model(args.model, threads=args.threads)

        def load(self) -> bool:
            self.inner.load()
            self.ready = True
            return True

        def predict(
            self, payload: dict[str, Any], headers: dict[str, str] | None = None
        ) -> dict[str, Any]:
            instances = payload.get("instances")
            if not isinstance(instances, list) or not instances:
                raise kserve.errors.InvalidInput("'instances' must be a non-empty list")
            try:
                batch = [self.inner.validate(x) for x in instances]
            except InvalidInput as exc:
                raise kserve.errors.InvalidInput(str(exc)) from None
            return {"predictions": self.inner.predict(batch)}

    model = Served(args.model)
    model.load()
    kserve.ModelServer(http_port=args.port, workers=1, enable_grpc=False).start([model])
    return 0


if __name__ == "__main__":
    sys.exit(main())
