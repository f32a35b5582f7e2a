"""KServe's own REST client (``kserve.InferenceRESTClient``, from the throwaway venv of
``tests/test_kserve_live.py``) against an adapter fronting a KServe ModelServer.

``python tests/kserve_client_calls.py URL``: binary and JSON inputs, binary outputs asked for;
prints one JSON document of what came back.
"""

import asyncio
import json
import sys

import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig
from kserve.protocol.infer_type import RequestedOutput


async def main(url: str) -> None:
    client = InferenceRESTClient(RESTConfig(protocol="v2"))
    rows = np.array([[1.0, 2.0], [3.0, 4.5]], dtype=np.float32)
    out = {}
    for binary in (True, False):
        x = InferInput("x", list(rows.shape), "FP32")
        x.set_data_from_numpy(rows, binary_data=binary)
        wanted = [RequestedOutput("sum", parameters={"binary_data": binary})]
        request = InferRequest("adder", [x], request_id=f"k-{binary}", request_outputs=wanted)
        headers: dict[str, str] = {}
        response = await client.infer(url, request, model_name="adder", response_headers=headers)
        (output,) = response.outputs
        out["binary" if binary else "json"] = {
            "id": response.id,
            "sum": output.as_numpy().tolist(),
            "datatype": output.datatype,
            "framed": "inference-header-content-length" in headers,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
