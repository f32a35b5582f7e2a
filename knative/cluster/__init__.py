"""Knative Serving on a real cluster: Services and manifests checked against the shipped CRD
schemas, the client (the official ``kubernetes`` package), the platform view, ``kn`` lines."""
