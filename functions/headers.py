"""Every HTTP header slackwise puts on the wire, in one place: between clients and the adapter,
the adapter and a platform, and a platform and a function's replicas. (Lower case: HTTP/1.1
header names are case-insensitive and the servers here hand them over lower-cased.)"""

from __future__ import annotations

# -- a client and the adapter ------------------------------------------------------------------
#: a request may tighten its SLO (milliseconds) below its function's or app's
SLO = "x-slo-ms"
#: the batch size(s) an answer rode in (one per stage for a chain)
BATCH_SIZE = "x-batch-size"

# -- a function's answer -----------------------------------------------------------------------
#: the model's own time for the batch, milliseconds
COMPUTE_MS = "x-compute-ms"
#: "1" on a replica's first answer (its model had just loaded)
COLD_START = "x-cold-start"
#: when the replica's process started (epoch seconds)
PROCESS_START = "x-process-start"
#: how long the replica took to load its model, milliseconds (on its first answer)
MODEL_LOAD_MS = "x-model-load-ms"
#: predict requests inside the replica when this one arrived, itself included
IN_FLIGHT = "x-in-flight"
#: distinct adapters the replica heard from within the window it was asked about (Swayam's n_F)
FRONTENDS = "x-frontends"
#: what a function answers besides its predictions
FUNCTION_ANSWER = (
    COMPUTE_MS,
    COLD_START,
    PROCESS_START,
    MODEL_LOAD_MS,
    BATCH_SIZE,
    IN_FLIGHT,
    FRONTENDS,
)

# -- the adapter to a function (passed on by a platform) ---------------------------------------
#: which adapter sent the request, and the window (seconds) to count adapters over
FRONTEND_ID = "x-frontend-id"
FRONTEND_WINDOW_S = "x-frontend-window-s"
#: the request headers a platform passes on to the replica it picks (the gossip's own)
PASSED_ON = frozenset((FRONTEND_ID, FRONTEND_WINDOW_S))

# -- a platform's answer -----------------------------------------------------------------------
#: how long the local platform's activator held a request (a cold start, or a busy replica)
PLATFORM_WAIT_MS = "x-platform-wait-ms"
#: "1" when the request arrived while its function had no ready replica: it hit a cold start
ARRIVED_COLD = "x-arrived-cold"
#: which replica answered
REPLICA = "x-replica"
