"""The kubelet of the local cluster's single node and its container machinery.

- `kubelet`: the process kubelet (`ProcessKubelet`): a `PodWorker` per pod bound to the node, the pods' hosts
  files, cleanup after a crash; `simulated`: the kwok-like kubelet that runs nothing;
- `podworker`: one pod's lifecycle (prepare, start, restart and stop its containers, report its status);
- `status`: pod and container status from what the container files say;
- `podenv`, `volumes`, `hosts`, `network`: what a pod's containers see (environment, volumes, hosts, network);
- `runtime`: starts shims and reads containers back from their files; `shim`: the per-container process
  (namespaces, log, signals, exit code); `execute`: `pods/exec` inside a running container.

The files they share are laid out by `t9k_provider.local.poddir`. Where what is still missing goes:
resource limits (cgroups) and `runAsUser` become fields of `shim.ShimSpec`, filled in `PodWorker._shim_spec`
and applied by the shim before it execs the container (the shim records an OOM kill as the attempt's
reason); probes run from `PodWorker.sync` and feed `status`; node capacity is the scheduler's
(`t9k_provider.local.node.scheduler`).
"""
