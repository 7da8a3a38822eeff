"""The node agents of the local cluster and what they share: `agents.run_node_agents` runs the scheduler, the
batch/v1 Job controller, the Endpoints controller (`endpoints`), a kubelet (`t9k_provider.local.kubelet`) and
the flink-operator (`t9k_provider.local.flink`) as API clients; `events` and `workloop` serve them all."""
