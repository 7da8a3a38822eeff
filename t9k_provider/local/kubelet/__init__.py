"""The kubelet of the local cluster's single node and its container machinery.

- `kubelet`: the process kubelet (`ProcessKubelet` gives each pod a `PodWorker`, keeps the hosts files);
  `simulated`: the kwok-like kubelet that runs nothing;
- `status`: pod and container status from what the container files say;
- `podenv`, `volumes`, `hosts`, `network`: a pod's environment, volumes, hosts file and network;
- `runtime`: starts shims and reads containers back from their files; `shim`: the per-container process
  (namespaces, log, signals, exit code); `execute`: `pods/exec` inside a running container.

The files they share live in the pod directory that `t9k_provider.local.poddir` lays out.
"""
