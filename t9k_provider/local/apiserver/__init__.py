"""Kubernetes-compatible API server of the embedded local cluster."""
