"""The kubelet of the local cluster's single node and its container machinery.

- `kubelet`: the process kubelet (`ProcessKubelet`): a `PodWorker` per pod bound to the node, the pods' hosts
  files, cleanup after a crash; `simulated`: the kwok-like kubelet that runs nothing;
- `podworker`: one pod's lifecycle (prepare, start, restart and stop its containers, report its status);
- `status`: pod and container status from what the container files say;
- `podenv`, `volumes`, `hosts`, `network`: what a pod's containers see (environment, volumes, hosts, network);
- `runtime`: starts shims and reads containers back from their files; `shim`: the per-container process
  (namespaces, cgroup, log, signals, exit code, OOMKilled); `execute`: `pods/exec` inside a running container;
- `cgroups`: the kubelet's, pods' and containers' cgroups (v2 or v1) that enforce resource limits;
- `devices`: the node's GPUs, which containers hold which (recorded in the pod directories), and what
  the containers see of them (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES);
- `identity`: the securityContext as the container process's credentials (computed by the pod worker into
  `shim.ShimSpec.identity`, applied by the shim and by exec after they join the cgroup); `probes`: startup,
  liveness and readiness probes, run from `PodWorker.sync`, whose verdicts feed `status` (and so Service
  endpoints, `hosts`).

The files they share are laid out by `t9k_provider.local.kubelet.poddir`; node capacity is the scheduler's
(`t9k_provider.local.scheduler.scheduler`).
"""
