"""The platform layer: Knative Serving semantics, on a real cluster or on this one machine."""
