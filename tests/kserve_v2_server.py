"""A KServe ModelServer (KServe's own server, from a throwaway venv the test makes; not a
dependency of the project) serving one model over the Open Inference Protocol: each row's sum.

``python tests/kserve_v2_server.py PORT``: V2 (``/v2/models/adder/infer``) and V1 routes, one
worker, no gRPC. Run only by ``tests/test_kserve_live.py`` with that venv's Python.
"""

import sys

import kserve
import numpy as np
from kserve import InferOutput, InferRequest, InferResponse


class Adder(kserve.Model):  # type: ignore[misc]
    """Each row of the first input tensor, summed (V2); each instance, summed (V1)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.ready = True

    def predict(self, payload, headers=None):  # type: ignore[no-untyped-def]
        if isinstance(payload, InferRequest):
            x = payload.inputs[0].as_numpy()
            sums = x.reshape(x.shape[0], -1).sum(axis=1).astype(np.float32)
            out = InferOutput(name="sum", shape=list(sums.shape), datatype="FP32")
            out.set_data_from_numpy(sums)
            return InferResponse(model_name=self.name, infer_outputs=[out], response_id=payload.id)
        return {"predictions": [sum(row) for row in payload["instances"]]}


if __name__ == "__main__":
    kserve.ModelServer(http_port=int(sys.argv[1]), enable_grpc=False, workers=1).start(
        [Adder("adder")]
    )
