"""What the local cluster's parts share, as Kubernetes' apimachinery: quantities, label and field selectors,
name rules, field errors, typed reads and comparisons of JSON values, events and the controllers' work loop.

A leaf: it imports nothing of the API server, the kubelet, the node agents or the controllers, which all
import it.
"""
