"""The floor every package stands on: Knative's scaling spec and its values, the clock (real and
virtual), the lean HTTP/1.1 client the adapter and the load generators share, and the errors
at their root."""
