"""An in-memory Kubernetes API server with Knative Serving's behaviour, for the cluster tests:
the test double the cluster client and view are tested against where no cluster runs (it
enforces a Role, validates Services by Knative's CRD schemas, answers server-side dry runs,
watches, server-side apply, and injects faults). Not part of the installed project."""
