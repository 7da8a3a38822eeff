"""The local cluster's controllers, one module each, as kube-controller-manager's: the workload controllers
(Deployments, ReplicaSets, StatefulSets, DaemonSets, batch/v1 Jobs) and the Endpoints controller, API clients
that the node agents run (`t9k_provider.local.agents`); `owned` and `podstate` are what the workload
controllers share about the pods they own."""
