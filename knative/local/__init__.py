"""Knative Serving's behaviour on this one machine: a gateway, a router with an activator's
buffering, a fleet of replica processes scaled by the KPA, each function's real runtime."""
