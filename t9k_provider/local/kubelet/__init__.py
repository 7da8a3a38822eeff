"""The kubelet of the local cluster's single node and its container machinery.

- `kubelet`: the process kubelet (`ProcessKubelet`): a `PodWorker` per pod bound to the node, the pods' hosts
  files, cleanup after a crash; `simulated`: the kwok-like kubelet that runs nothing;
- `podworker`: one pod's lifecycle (prepare, start, restart and stop its containers, report its status);
- `status`: pod and container status from what the container files say;
- `podenv`, `volumes`, `hosts`, `network`: what a pod's containers see (environment, volumes, hosts, network);
- `runtime`: starts shims and reads containers back from their files; `shim`: the per-container process
  (namespaces, cgroup, log, signals, exit code, OOMKilled); `execute`: `pods/exec` inside a running container;
- `cgroups`: the kubelet's, pods' and containers' cgroups (v2 or v1) that enforce resource limits.

The files they share are laid out by `t9k_provider.local.poddir`. Where what is still missing goes:
`runAsUser` becomes a field of `shim.ShimSpec`, filled in `PodWorker._shim_spec` and applied by the shim
before it execs the container (as the attempt's cgroup is); probes run from `PodWorker.sync` and feed
`status`; node capacity is the scheduler's (`t9k_provider.local.node.scheduler`).
"""
