"""Handwritten digit classifier (MLProxy's lightest workload)."""
