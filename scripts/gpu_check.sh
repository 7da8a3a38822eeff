#!/usr/bin/env bash
# The local cluster's GPUs on a machine that has some (docs/local-cluster.md, section "GPUs").
#
# Starts `t9k-local up` on a state directory of its own, then:
#   1. runs two single-GPU pods at once (one, and a second that must wait, on a one-GPU machine) and prints
#      what each sees: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, `nvidia-smi -L` (which lists every GPU
#      of the machine: nvidia-smi ignores CUDA_VISIBLE_DEVICES) and, with torch, the GPUs CUDA shows it;
#   2. runs a pod without a GPU limit and prints its view (CUDA_VISIBLE_DEVICES="", no GPU for CUDA);
#   3. with torch built with CUDA: a one-replica PyTorchTrainingJob whose replica all-reduces a tensor with
#      NCCL on its GPU;
# prints a summary and exits 0 when every check passed, 1 otherwise. Stops the cluster (and with it every
# pod) and removes its state directory on the way out, also when interrupted. Offline: nothing is fetched.
#
# Prints "SKIPPED: <reason>" and exits 0 where it cannot check: not root (the process kubelet needs root for
# its namespaces and cgroups), no /dev/nvidiaN device, or no Python with the project and the kubernetes client;
# without torch built with CUDA (or without a working CUDA driver) the job is SKIPPED and the rest runs.
#
# Environment: T9K_GPU_CHECK_TIMEOUT (seconds for the checks, default 300; `up` and `down` are bounded apart),
# T9K_GPU_CHECK_POD_SUBNET (the cluster's pod subnet, default 250, apart from a cluster on the default 0),
# T9K_GPU_CHECK_SIMULATE=N (a dry run on a machine without GPUs: `--gpus N` simulated devices, only what the
# pods see is checked; for working on this script).
set -euo pipefail

LIMIT="${T9K_GPU_CHECK_TIMEOUT:-300}"
SUBNET="${T9K_GPU_CHECK_POD_SUBNET:-250}"
SIMULATE="${T9K_GPU_CHECK_SIMULATE:-}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

skip() {
    echo "SKIPPED: $*"
    exit 0
}

[ "$(id -u)" -eq 0 ] || skip "not root (the process kubelet runs pods in namespaces and cgroups, as root)"

shopt -s nullglob
devices=(/dev/nvidia[0-9]*)
shopt -u nullglob
UP_FLAGS=()
if [ -n "$SIMULATE" ]; then
    UP_FLAGS=(--gpus "$SIMULATE")
    echo "dry run: $SIMULATE simulated GPUs (T9K_GPU_CHECK_SIMULATE)"
elif [ "${#devices[@]}" -eq 0 ]; then
    skip "no NVIDIA GPU on this machine (no /dev/nvidia[0-9]* device)"
fi

if [ -x "$ROOT/.venv/bin/python" ]; then
    PY="$ROOT/.venv/bin/python"
else
    PY="$(command -v python3 || true)"
fi
[ -n "$PY" ] || skip "no python3"
if [ -x "$ROOT/.venv/bin/t9k-local" ]; then
    T9K=("$ROOT/.venv/bin/t9k-local")
else
    T9K=("$PY" -m t9k_provider.local.cli)
fi
timeout 60 "$PY" -c "import kubernetes, t9k_provider.local.cli" 2>/dev/null \
    || skip "$PY cannot import the project and the kubernetes client (install the project: make install)"

TORCH="no"
if [ -z "$SIMULATE" ] && timeout 120 "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    >/dev/null 2>&1; then
    TORCH="yes"
fi

STATE="$(mktemp -d /tmp/t9k-gpu-check.XXXXXX)"
STARTED=""
cleanup() {
    local rc=$?
    if [ -n "$STARTED" ]; then
        local pid
        pid="$(head -n 1 "$STATE/server.pid" 2>/dev/null || true)"
        timeout 60 "${T9K[@]}" down --state-dir "$STATE" --timeout 30 >/dev/null 2>&1 || true
        for _ in $(seq 300); do  # down returns once the server lets go of its pid file: wait for its exit
            [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -rf "$STATE"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "starting t9k-local on $STATE (pod subnet $SUBNET) with ${T9K[*]}"
STARTED="yes"
if ! timeout 120 "${T9K[@]}" up --state-dir "$STATE" --pod-subnet "$SUBNET" --timeout 90 "${UP_FLAGS[@]}" \
    >/dev/null; then
    echo "FAIL: t9k-local up did not start; its log:"
    tail -n 40 "$STATE/server.log" || true
    exit 1
fi

# The checks, against the cluster's kubeconfig; bounded by LIMIT (and killed 10 s after it).
timeout --kill-after=10 "$LIMIT" "$PY" - "$STATE/kubeconfig" "$LIMIT" "$TORCH" "${#devices[@]}" "$SIMULATE" \
    <<'PYTHON'
import json
import re
import sys
import time

from kubernetes import client, config
from kubernetes.client.rest import ApiException

kubeconfig, limit, torch_ok, machine_gpus, simulate = sys.argv[1:6]
DEADLINE = time.monotonic() + float(limit) - 15  # leave time to print the summary
NS = "gpu-check"
GPU = "nvidia.com/gpu"
api = config.new_client_from_config(str(kubeconfig))
core = client.CoreV1Api(api)
custom = client.CustomObjectsApi(api)
results = []  # (PASS | FAIL | SKIPPED, check, detail)

SHOW = r"""
import os, subprocess, sys
print("CUDA_VISIBLE_DEVICES=%r" % os.environ.get("CUDA_VISIBLE_DEVICES"))
print("NVIDIA_VISIBLE_DEVICES=%r" % os.environ.get("NVIDIA_VISIBLE_DEVICES"))
try:
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout.strip()
    print("nvidia-smi -L (every GPU of the machine):\n  " + out.replace("\n", "\n  "))
except (OSError, subprocess.TimeoutExpired) as exc:
    print("nvidia-smi -L: %s" % exc)
try:
    import torch
    count = torch.cuda.device_count()
    uuids = []
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        uuids.append(str(getattr(props, "uuid", props.name)))
    print("TORCH_GPUS=%d %s" % (count, ",".join(uuids)))
except ImportError:
    print("TORCH_GPUS=- (no torch)")
sys.stdout.flush()
"""

ALLREDUCE = r"""
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(0)
t = torch.ones(4, device="cuda")
dist.all_reduce(t)
world = dist.get_world_size()
print("rank %d/%d CUDA_VISIBLE_DEVICES=%s %s all_reduce=%s" % (
    dist.get_rank(), world, os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.get_device_name(0), t.tolist()))
assert t.tolist() == [float(world)] * 4
dist.destroy_process_group()
print("NCCL_ALLREDUCE_OK")
"""


def record(verdict, check, detail=""):
    results.append((verdict, check, detail))
    print(f"{verdict}: {check}" + (f": {detail}" if detail else ""), flush=True)


def wait(what, probe, seconds=120.0):
    end = min(DEADLINE, time.monotonic() + seconds)
    while time.monotonic() < end:
        try:
            value = probe()
        except ApiException:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def pod(name, gpus, script, sleep=True):
    container = {
        "name": "main",
        "image": "local",
        "command": ["sh", "-c", f'"{sys.executable}" -c "$SHOW"' + ("; exec sleep 3600" if sleep else "")],
        "env": [{"name": "SHOW", "value": script}],
    }
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}}
    body = {"metadata": {"name": name}, "spec": {"restartPolicy": "Never", "containers": [container]}}
    core.create_namespaced_pod(NS, body)


def log(name):
    return core.read_namespaced_pod_log(name, NS, _preload_content=False).data.decode()


def view(name):
    text = wait(f"{name} to print its view", lambda: "TORCH_GPUS=" in (t := log(name)) and t)
    print(f"--- {name}\n{text.rstrip()}", flush=True)
    values = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    return values


def phase(name):
    return core.read_namespaced_pod(name, NS).status.phase


def scheduling_message(name):
    conditions = core.read_namespaced_pod(name, NS).status.conditions or []
    return next((c.message or "" for c in conditions if c.type == "PodScheduled" and c.status == "False"), "")


def check_gpu_pods(gpus):
    pod("gpu-a", 1, SHOW)
    pod("gpu-b", 1, SHOW)
    if gpus < 2:
        a = view("gpu-a")
        wait("gpu-b unschedulable", lambda: "Insufficient nvidia.com/gpu" in scheduling_message("gpu-b"), 60)
        ok = a["CUDA_VISIBLE_DEVICES"] == a["NVIDIA_VISIBLE_DEVICES"] == "'0'"
        record("PASS" if ok else "FAIL", "one GPU: the pod holds it, a second waits (Insufficient)", str(a))
        return
    wait("both GPU pods running", lambda: phase("gpu-a") == phase("gpu-b") == "Running")
    a, b = view("gpu-a"), view("gpu-b")
    ids = sorted(v["CUDA_VISIBLE_DEVICES"] for v in (a, b))
    ok = all(v["CUDA_VISIBLE_DEVICES"] == v["NVIDIA_VISIBLE_DEVICES"] for v in (a, b)) and ids == ["'0'", "'1'"]
    record("PASS" if ok else "FAIL", "two single-GPU pods at once hold distinct devices", " vs ".join(ids))
    torch_views = [v["TORCH_GPUS"] for v in (a, b)]
    if torch_ok != "yes":
        record("SKIPPED", "CUDA sees one distinct GPU in each pod", "no torch with CUDA in the pods")
    else:
        counts = [t.split()[0] for t in torch_views]
        uuids = [t.split()[1] if len(t.split()) > 1 else "" for t in torch_views]
        ok = counts == ["1", "1"] and uuids[0] != uuids[1]
        record("PASS" if ok else "FAIL", "CUDA sees one distinct GPU in each pod", " vs ".join(torch_views))


def check_cpu_pod():
    pod("no-gpu", 0, SHOW, sleep=False)
    v = view("no-gpu")
    ok = v["CUDA_VISIBLE_DEVICES"] == "''" and v["NVIDIA_VISIBLE_DEVICES"] == "'void'"
    ok = ok and (v["TORCH_GPUS"].startswith("-") or v["TORCH_GPUS"].startswith("0"))
    record("PASS" if ok else "FAIL", "a pod without a GPU limit sees no GPU", str(v))


def job_phase(name):
    obj = custom.get_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", NS, "pytorchtrainingjobs", name)
    return (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed") and obj["status"]["phase"]


def check_nccl_job():
    if torch_ok != "yes":
        record("SKIPPED", "one-replica PyTorchTrainingJob all-reduces with NCCL", "no torch with CUDA here")
        return
    container = {
        "name": "pytorch",
        "image": "local",
        "command": [sys.executable, "-c", ALLREDUCE],
        "resources": {"limits": {GPU: "1"}},
        "env": [{"name": "NCCL_DEBUG", "value": "WARN"}],
    }
    replica = {"type": "worker", "replicas": 1, "restartPolicy": "Never"}
    replica["template"] = {"spec": {"containers": [container]}}
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": "nccl"},
        "spec": {"replicaSpecs": [replica]},
    }
    custom.create_namespaced_custom_object("batch.tensorstack.dev", "v1beta1", NS, "pytorchtrainingjobs", job)
    verdict = wait("the PyTorchTrainingJob to end", lambda: job_phase("nccl"), 240)
    text = log("nccl-worker-0")
    print(f"--- nccl-worker-0\n{text.rstrip()}", flush=True)
    ok = verdict == "Succeeded" and "NCCL_ALLREDUCE_OK" in text
    record("PASS" if ok else "FAIL", "one-replica PyTorchTrainingJob all-reduces with NCCL", f"job {verdict}")


def main():
    node = core.list_node().items[0]
    gpus = int(node.status.allocatable.get(GPU, "0"))
    print(f"node {node.metadata.name}: {GPU} {gpus} ({machine_gpus} /dev/nvidiaN devices)", flush=True)
    core.create_namespace({"metadata": {"name": NS}})
    for check in (lambda: check_gpu_pods(gpus), check_cpu_pod):
        try:
            check()
        except TimeoutError as exc:
            record("FAIL", "pods", str(exc))
    for name in ("gpu-a", "gpu-b"):  # free the GPUs for the job
        try:
            core.delete_namespaced_pod(name, NS, grace_period_seconds=1)
        except ApiException:
            pass
    try:
        check_nccl_job()
    except TimeoutError as exc:
        record("FAIL", "one-replica PyTorchTrainingJob all-reduces with NCCL", str(exc))
    print("\nsummary:")
    for verdict, check, detail in results:
        print(f"  {verdict:8} {check}")
    failed = sum(verdict == "FAIL" for verdict, _, _ in results)
    print(json.dumps({v: sum(r[0] == v for r in results) for v in ("PASS", "FAIL", "SKIPPED")}))
    return 1 if failed else 0


sys.exit(main())
PYTHON
