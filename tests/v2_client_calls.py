"""NVIDIA's V2 client (``tritonclient.http``, from a throwaway venv the test makes; not a
dependency of the project) against an adapter, with the client's defaults and each other form.

``python tests/v2_client_calls.py HOST:PORT ROWS.json``: prints one JSON document of what came
back. Run only by ``tests/test_v2_clients.py`` with that venv's Python.
"""

import json
import sys

import numpy as np
import tritonclient.http as http
from tritonclient.utils import InferenceServerException


def outputs(result, names):  # type: ignore[no-untyped-def]
    return {name: result.as_numpy(name).tolist() for name in names}


def typed(result):  # type: ignore[no-untyped-def]
    """Each output's name, datatype and shape as the answer gives them."""
    return [[o["name"], o["datatype"], o["shape"]] for o in result.get_response()["outputs"]]


def main() -> None:
    c = http.InferenceServerClient(sys.argv[1])
    with open(sys.argv[2]) as f:
        rows = np.asarray(json.load(f), dtype=np.float32)
    out = {
        "live": c.is_server_live(),
        "ready": c.is_server_ready(),
        "models_ready": [c.is_model_ready(m) for m in ("digits", "embed", "ask")],
        "server": c.get_server_metadata(),
        "metadata": {m: c.get_model_metadata(m) for m in ("digits", "embed", "ask")},
    }
    x = http.InferInput("input-0", list(rows.shape), "FP32")
    x.set_data_from_numpy(rows)  # binary, the client's default; no outputs named: all, binary
    result = c.infer("digits", [x], request_id="req-1")
    out["default"] = outputs(result, ["label", "probability"])
    out["default_types"] = typed(result)
    out["default_id"] = result.get_response().get("id")
    as_json = http.InferInput("input-0", list(rows.shape), "FP32")
    as_json.set_data_from_numpy(rows, binary_data=False)
    result = c.infer(
        "digits", [as_json], outputs=[http.InferRequestedOutput("label", binary_data=False)]
    )
    out["json_label"] = outputs(result, ["label"])
    out["json_names"] = [o["name"] for o in result.get_response()["outputs"]]
    result = c.infer(
        "digits",
        [x],
        outputs=[
            http.InferRequestedOutput("probability", binary_data=True),
            http.InferRequestedOutput("label", binary_data=False),
        ],
    )
    out["mixed"] = outputs(result, ["probability", "label"])
    half = http.InferInput("input-0", list(rows.shape), "FP16")
    half.set_data_from_numpy(rows.astype(np.float16))
    out["fp16"] = outputs(c.infer("digits", [half]), ["label"])
    text = http.InferInput("input-0", [2], "BYTES")
    text.set_data_from_numpy(np.array([b"a cat sat on the mat", b"slack is time"], dtype=object))
    result = c.infer("embed", [text])
    out["embed_shape"] = list(result.as_numpy("embedding").shape)
    out["embed_types"] = typed(result)
    question = http.InferInput("input-0", [1], "BYTES")
    question.set_data_from_numpy(np.array([b"What is an espresso?"], dtype=object))
    result = c.infer("ask", [question])
    answer = result.as_numpy("answer")
    out["app"] = {"answer": [a.decode() for a in answer.ravel()], "types": typed(result)}
    wrong = http.InferInput("input-0", [1], "BYTES")
    wrong.set_data_from_numpy(np.array([b"7"], dtype=object))
    try:
        c.infer("digits", [wrong])
        out["wrong_datatype"] = "answered"
    except InferenceServerException as exc:
        out["wrong_datatype"] = str(exc)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
