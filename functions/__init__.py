"""Real model inference functions on a shared runtime (KServe V1 protocol)."""
