"""`make demo`: run the example training pipeline end to end on the embedded local cluster.

Starts `t9k-local up` in a fresh state directory, points an isolated Airflow (its own AIRFLOW_HOME, the
repository's `dags_examples/`, `kubernetes_default` as `t9k-local connection` prints it: the kubeconfig and
the console's link templates) at it, runs `airflow dags test t9k_training_pipeline`, prints each T9k Job's
phase and replica counts as they change, then a summary that ends with the training's TensorBoard (its
address, and the loss per epoch it serves drawn into `loss-curve.png`). The cluster is stopped (also on
failure and Ctrl-C) unless `--keep-cluster` (`T9K_DEMO_KEEP=1`) keeps it up after the run to browse the
TensorBoard and the console. Exit status: 0 when every task succeeded, the training loss fell and its
TensorBoard served the curve, 1 when the pipeline failed, 2 when the demo could not run it.

Everything lives under `.t9k-demo/` (or `--home`): `cluster/` is recreated on every run (state from an
earlier, possibly killed, run cannot leak into this one); `airflow/` (metadata DB), `logs/` (task logs, one
directory per run) and `data/` (data sets and trained models, one directory per run) are kept. The training's
epoch checkpoints (its `checkpoint_volume`, the claim `t9k-checkpoints`) and TensorBoard logs are a
directory of the cluster's state, so they last until the next run; `loss-curve.png` is the latest run's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from kubernetes import client, config

from t9k_provider.jobs import GROUP, KINDS, VERSION
from t9k_provider.local.connection import airflow_connection
from t9k_provider.local.kubelet.network import namespaces_available
from t9k_provider.local.state import StateDir

REPO = Path(__file__).resolve().parents[1]
DAG_ID = "t9k_training_pipeline"
NAMESPACE = "default"
# Set on every job by the operators (t9k_provider.jobclient.identity; importing it would load Airflow here).
TASK_ANNOTATION = "airflow.apache.org/task-id"
#: The training's checkpoint_volume (the DAG's CHECKPOINTS): on the local cluster a claim is a directory of
#: its state, `volumes/<namespace>/<claim>`, and each task instance's is `<dag>/<run>/<task>` in it.
CHECKPOINT_CLAIM = "t9k-checkpoints"
LOSS_LINE = re.compile(r"epoch (\d+)/(\d+) loss=([0-9.eE+-]+)")
TAIL_LINES = 20
CLUSTER_START_TIMEOUT = 120
PIPELINE_TIMEOUT = 1800
#: The scalar train_ddp.py writes once per epoch (rank 0), and how long the demo waits for the training's
#: TensorBoard to serve all of its epochs (it reloads its logs every 2 s and is Ready long before the end).
EPOCH_TAG = "epoch_loss"
TENSORBOARD_WAIT = 30.0
LOSS_CURVE = "loss-curve.png"


class DemoError(Exception):
    """The demo could not run the pipeline (as opposed to: the pipeline ran and failed)."""


def say(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", flush=True)


def venv_bin() -> Path:
    return Path(sys.executable).parent


def run_quiet(cmd: list[str], env: dict[str, str], timeout: float, what: str) -> str:
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise DemoError(f"{what} failed (exit {result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


# -- the local cluster ----------------------------------------------------------------------------------


@contextlib.contextmanager
def local_cluster(state_dir: Path, env: dict[str, str], keep: bool = False) -> Iterator[Path]:
    """A fresh `t9k-local` (with the controller) for the duration of the block; yields its kubeconfig.
    With ``keep``, a block that ends normally leaves the cluster running (to browse its TensorBoard and
    console)."""
    t9k_local = str(venv_bin() / "t9k-local")
    if state_dir.exists():
        # A previous run may have been killed before it could stop its cluster.
        subprocess.run(
            [t9k_local, "down", "--state-dir", str(state_dir)],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(state_dir)
    say(f"starting the local cluster (state in {state_dir})")
    started = time.monotonic()
    stop = True
    try:
        run_quiet(
            [t9k_local, "up", "--state-dir", str(state_dir)], env, CLUSTER_START_TIMEOUT, "t9k-local up"
        )
        say(f"local cluster up in {time.monotonic() - started:.1f}s")
        yield state_dir / "kubeconfig"
        stop = not keep
    finally:
        if stop:
            say("stopping the local cluster")
            subprocess.run(
                [t9k_local, "down", "--state-dir", str(state_dir)], env=env, timeout=120, check=False
            )
        else:
            say(f"the local cluster keeps running: `{t9k_local} down --state-dir {state_dir}` stops it")


def node_gpus(core: client.CoreV1Api) -> int:
    """The GPUs the local cluster's node offers (``nvidia.com/gpu`` allocatable; none on a CPU machine)."""
    return sum(int((n.status.allocatable or {}).get("nvidia.com/gpu", 0)) for n in core.list_node().items)


# -- watching the T9k Jobs -----------------------------------------------------------------------------


@dataclass
class JobView:
    kind: str
    name: str
    task_id: str
    phase: str
    replicas: str
    reason: str


def describe_job(kind: str, obj: dict[str, Any]) -> JobView:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    aggregate = status.get("aggregate") or {}
    counts = ", ".join(f"{n} {state}" for state, n in sorted(aggregate.items()) if n)
    failed = [
        c for c in status.get("conditions") or [] if c.get("type") == "Failed" and c.get("status") == "True"
    ]
    return JobView(
        kind=kind,
        name=meta.get("name", "?"),
        task_id=(meta.get("annotations") or {}).get(TASK_ANNOTATION, "?"),
        phase=status.get("phase") or "Pending",
        replicas=counts or "no replicas yet",
        reason=(failed[0].get("message") or failed[0].get("reason") or "") if failed else "",
    )


@dataclass
class JobWatcher:
    """Polls every T9k kind and prints a line whenever a job's phase or replica counts change."""

    api: client.CustomObjectsApi
    interval: float = 1.0
    jobs: dict[str, JobView] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def poll(self) -> None:
        for kind, model in KINDS.items():
            try:
                listed = self.api.list_namespaced_custom_object(
                    GROUP, VERSION, NAMESPACE, model.PLURAL, _request_timeout=10
                )
            except Exception:  # the API may be busy or restarting; the next poll catches up
                continue
            for obj in listed.get("items") or []:
                view = describe_job(kind, obj)
                key = f"{kind}/{view.name}"
                if self.jobs.get(key) != view:
                    self.jobs[key] = view
                    extra = f"  ({view.reason})" if view.reason else ""
                    say(f"  {kind} {view.name}: {view.phase}, replicas: {view.replicas}{extra}")

    def run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def __enter__(self) -> JobWatcher:
        self._thread = threading.Thread(target=self.run, name="job-watcher", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.poll()  # the final state


# -- Airflow --------------------------------------------------------------------------------------------


def airflow_env(
    base: dict[str, str], airflow_home: Path, connection: dict[str, Any], data_root: Path
) -> dict[str, str]:
    """Airflow's environment; ``connection``: `kubernetes_default` (what `t9k-local connection` prints)."""
    extra = {**connection["extra"], "namespace": NAMESPACE}
    return {
        **base,
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags_examples"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({**connection, "extra": extra}),
        "T9K_DEMO_DATA_ROOT": str(data_root),
    }


TASK_START = re.compile(r"\[DAG TEST\] starting task_id=(\S+)")
TASK_END = re.compile(r"\[DAG TEST\] end task task_id=(\S+)")
TASK_STATE = re.compile(r"Task instance state updated .* new_state=(\w+)")
#: A replica log line copied by the operator: `... [<pod>/<container>] <text>   [airflow.task...`.
REPLICA_LINE = re.compile(r"\] \[([\w.-]+/[\w.-]+)\] (.*?)\s+\[airflow\.task")
REPLICA_SHOWN = re.compile(r"epoch \d+/\d+ loss=|^EVAL |^DATASET |^checkpoint|T9K_DEMO_FAIL|Error")
#: The operator's own lines: the job created or adopted, its end, and the training's progress (its reports
#: condensed, at most one line every 5 s).
OPERATOR_LINE = re.compile(
    r"\[(?:info|error)\s*\] ((?:created|adopted) job \S+|job \S+ (?:succeeded|failed)[^\[]*|progress: [^\[]*)"
)


def interesting(line: str, state: str | None) -> str | None:
    """The short form of an `airflow dags test` output line worth showing live, else None."""
    if m := TASK_START.search(line):
        return f"task {m[1]}: started"
    if m := TASK_END.search(line):
        return f"task {m[1]}: {state or 'ended'}"
    if (m := REPLICA_LINE.search(line)) and REPLICA_SHOWN.search(m[2]):
        return f"  [{m[1]}] {m[2]}"
    if m := OPERATOR_LINE.search(line):
        return f"  {m[1].strip()}"
    return None


#: The `airflow` command, except that the interpreter skips its final garbage collections: with Airflow's
#: heap they took about 6 s on 2 cores after the DAG run had ended (the objects frozen are the process's
#: memory, which the OS frees at exit anyway; atexit handlers and the streams' flush still run).
AIRFLOW_CLI = """
import gc, sys
from airflow.__main__ import main
sys.argv[0] = "airflow"
try:
    main()
finally:
    gc.freeze()
"""


def run_pipeline(env: dict[str, str], logical_date: str, logs: Path) -> int:
    """`airflow dags test`: full output in `logs/dags-test.log`, each task's part in `logs/<task>.log`."""
    args = ["dags", "test", DAG_ID, logical_date]
    cmd = [sys.executable, "-c", AIRFLOW_CLI, *args]
    logs.mkdir(parents=True, exist_ok=True)
    say(f"running `airflow {' '.join(args)}` (output in {logs}/)")
    say("Airflow parses the DAGs and starts its in-process API server before the first task (5-10 s)")
    task_log: TextIO | None = None
    state: str | None = None
    with (
        (logs / "dags-test.log").open("w") as log,
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc,
    ):
        deadline = time.monotonic() + PIPELINE_TIMEOUT
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                if m := TASK_START.search(line):
                    task_log, state = (logs / f"{m[1]}.log").open("a"), None
                if m := TASK_STATE.search(line):
                    state = m[1]
                if task_log is not None:
                    task_log.write(line)
                    if TASK_END.search(line):
                        task_log.close()
                        task_log = None
                if shown := interesting(line, state):
                    say(shown)
                if time.monotonic() > deadline:
                    raise DemoError(f"the pipeline did not finish within {PIPELINE_TIMEOUT}s")
            return proc.wait(timeout=60)
        finally:
            if task_log is not None:
                task_log.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # lets the running task's on_kill delete its job
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()


def task_states(airflow_home: Path) -> tuple[str, dict[str, str], Any]:
    """The latest run of the pipeline, its task states and the `report` task's XCom (None if it has none),
    read from Airflow's metadata DB (SQLite)."""
    with contextlib.closing(sqlite3.connect(airflow_home / "airflow.db")) as db:
        row = db.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (DAG_ID,)
        ).fetchone()
        if row is None:
            raise DemoError(f"no run of {DAG_ID} was recorded; see the dags-test log")
        run_id = row[0]
        rows = db.execute(
            "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ? "
            "ORDER BY start_date IS NULL, start_date, priority_weight DESC, task_id",
            (DAG_ID, run_id),
        ).fetchall()
        result = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = 'report' "
            "AND key = 'return_value'",
            (DAG_ID, run_id),
        ).fetchone()
    return (
        run_id,
        {task_id: state or "none" for task_id, state in rows},
        json.loads(result[0]) if result else None,
    )


def migrate_db(env: dict[str, str], airflow_home: Path) -> None:
    """`airflow db migrate` once per Airflow version: warm runs skip its ~20 seconds."""
    stamp = airflow_home / ".migrated"
    version = importlib.metadata.version("apache-airflow")
    if (airflow_home / "airflow.db").exists() and stamp.exists() and stamp.read_text() == version:
        return
    say("preparing the Airflow metadata database")
    run_quiet([str(venv_bin() / "airflow"), "db", "migrate"], env, 300, "airflow db migrate")
    stamp.write_text(version)


# -- summary ----------------------------------------------------------------------------------------------


def job_pods(core: client.CoreV1Api, job: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"tensorstack.dev/owner-name={job}").items
    return sorted(pods, key=lambda p: p.metadata.name)


def pod_log(core: client.CoreV1Api, pod: client.V1Pod, tail: int | None = None) -> str:
    container = pod.spec.containers[0].name
    try:
        response = core.read_namespaced_pod_log(
            pod.metadata.name, NAMESPACE, container=container, tail_lines=tail, _preload_content=False
        )
    except client.ApiException as exc:
        return f"(log unavailable: {exc.status} {exc.reason})"
    return response.data.decode("utf-8", errors="replace")


def losses(log: str) -> list[float]:
    return [float(m[3]) for m in LOSS_LINE.finditer(log)]


@dataclass
class Run:
    """What the summary reports on: one pipeline run and where its artefacts are."""

    run_id: str
    states: dict[str, str]
    result: Any
    jobs: list[JobView]
    logs: Path
    pods_dir: Path
    data_root: Path
    losses: list[float] = field(default_factory=list)  # the training's per epoch, once the summary read them


def summarize(run: Run, core: client.CoreV1Api) -> bool:
    """Print the summary; returns whether the run counts as a success."""
    by_task = {job.task_id: job for job in run.jobs}
    print(f"\n==== {DAG_ID}  run {run.run_id} ====")
    for task_id, state in run.states.items():
        job = by_task.get(task_id)
        print(f"  {task_id:<22} {state:<16} {f'{job.kind} {job.name} ({job.phase})' if job else ''}")
    ok = bool(run.states) and all(state == "success" for state in run.states.values())

    train = by_task.get("train")
    if ok and train:
        pods = job_pods(core, train.name)
        values = run.losses = losses(pod_log(core, pods[0])) if pods else []
        if values:
            print(
                f"\n  training loss: epoch 1 {values[0]:.6f} -> epoch {len(values)} {values[-1]:.6f} "
                f"(read from {pods[0].metadata.name}'s log)"
            )
        if not values or values[-1] >= values[0]:
            print("  the training loss did not fall: the run counts as failed")
            ok = False

    if run.result is not None:
        print(f"\n  report XCom   : {json.dumps(run.result)}")
    print(f"\n  task logs     : {run.logs}/<task>.log  (all output: {run.logs}/dags-test.log)")
    if train:
        print(f"  replica logs  : {run.pods_dir}/{NAMESPACE}_{train.name}-worker-<rank>_<uid>/pytorch/0.log")
    run_dir = run.data_root / "runs" / re.sub(r"[^A-Za-z0-9._-]", "_", run.run_id)
    if (run_dir / "model" / "model.pt").is_file():
        print(f"  checkpoint    : {run_dir / 'model' / 'model.pt'}  (metrics.json beside it)")
    claim = run.pods_dir.parent / "volumes" / NAMESPACE / CHECKPOINT_CLAIM
    epochs = claim / DAG_ID / re.sub(r"[^A-Za-z0-9._-]", "_", run.run_id) / "train" / "latest.pt"
    if epochs.is_file():
        print(f"  last epoch    : {epochs}  (a retry of train resumes from it)")
    if (run_dir / "eval" / "eval.json").is_file():
        print(f"  evaluation    : {run_dir / 'eval' / 'eval.json'}")

    for task_id, state in run.states.items():
        if state != "failed":
            continue
        job = by_task.get(task_id)
        print(
            f"\n  FAILED: task {task_id!r}"
            + (f", {job.kind} {job.name}: {job.reason or job.phase}" if job else "")
        )
        for pod in job_pods(core, job.name) if job else []:
            print(
                f"  --- last {TAIL_LINES} log lines of replica {pod.metadata.name} ({pod.status.phase}) ---"
            )
            for line in pod_log(core, pod, TAIL_LINES).splitlines():
                print(f"    {line}")
    return ok


# -- the training's TensorBoard ---------------------------------------------------------------------------


@dataclass
class Board:
    """The training job's TensorBoard as the demo found it: where it serves (None: it does not), its links,
    why it does not serve, and the loss per epoch it served."""

    url: str | None
    link: str | None  # the train task's "TensorBoard" link (the console's redirect)
    job_page: str | None  # its "T9k Job" link
    why: str
    epochs: list[tuple[int, float]] = field(default_factory=list)


def fetch_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def served_epochs(url: str) -> list[tuple[int, float]]:
    """The ``epoch_loss`` scalars TensorBoard at ``url`` serves (its HTTP API), by epoch."""
    runs = fetch_json(url + "data/plugin/scalars/tags")
    run = next((name for name, tags in sorted(runs.items()) if EPOCH_TAG in tags), None)
    if run is None:
        return []
    query = urllib.parse.urlencode({"run": run, "tag": EPOCH_TAG})
    return [
        (int(step), float(value))
        for _, step, value in fetch_json(f"{url}data/plugin/scalars/scalars?{query}")
    ]


def find_board(api: client.CustomObjectsApi, job: str, epochs: int, connection: dict[str, Any]) -> Board:
    """The TensorBoard the controller made for training job ``job`` (it bears the job's name), once it serves
    ``epochs`` epochs, within ``TENSORBOARD_WAIT`` seconds."""
    extra = connection["extra"]
    link = extra.get("tensorboard_url_template")
    page = extra.get("job_url_template")
    board = Board(
        None,
        link.format(namespace=NAMESPACE, name=job) if link else None,
        page.format(namespace=NAMESPACE, kind="PyTorchTrainingJob", name=job) if page else None,
        "not found",
    )
    deadline = time.monotonic() + TENSORBOARD_WAIT
    while True:
        try:
            tb = api.get_namespaced_custom_object(
                "tensorstack.dev", "v1beta1", NAMESPACE, "tensorboards", job
            )
            status = tb.get("status") or {}
            ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
            board.url = status.get("url") if ready.get("status") == "True" else None
            board.why = str(ready.get("message") or status.get("phase") or "not ready yet")
            if board.url:
                board.epochs = served_epochs(board.url)
                board.why = f"it serves {len(board.epochs)} of {epochs} epochs"
        except (client.ApiException, OSError, ValueError) as exc:
            board.why = str(exc)
        if (board.url and len(board.epochs) >= epochs) or time.monotonic() > deadline:
            return board
        time.sleep(0.5)


def draw_loss_curve(epochs: list[tuple[int, float]], job: str, path: Path) -> None:
    """The loss per epoch as the TensorBoard served it, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(6, 4), dpi=100)
    axes.plot([e for e, _ in epochs], [loss for _, loss in epochs], marker="o")
    axes.set(xlabel="epoch", ylabel="loss (mean over ranks)", title=f"{job}: training loss per epoch")
    axes.set_xticks([e for e, _ in epochs])
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)


def show_board(board: Board, job: str, home: Path, expected: int) -> bool:
    """Print where the TensorBoard is and draw the loss curve it serves; whether it served every epoch."""
    print(f"\n  TensorBoard   : {board.url or f'not serving ({board.why})'}")
    if board.link:
        print(f'                  (the train task\'s "TensorBoard" link: {board.link})')
    if board.job_page:
        print(f'  job page      : {board.job_page}  (its "T9k Job" link)')
    if not board.epochs or len(board.epochs) < expected:
        print(f"  loss curve    : not drawn: {board.why}")
        return False
    path = home / LOSS_CURVE
    draw_loss_curve(board.epochs, job, path)
    shown = f"{EPOCH_TAG} of epochs 1-{len(board.epochs)} as the TensorBoard serves it"
    print(f"  loss curve    : {path}  ({shown})")
    return True


# -- main -----------------------------------------------------------------------------------------------


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("T9K_DEMO_HOME", REPO / ".t9k-demo"))
    )
    parser.add_argument(
        "--fail-training",
        action="store_true",
        default=os.environ.get("T9K_DEMO_FAIL") == "1",
        help="make the training script exit 1 after its first epoch (also: T9K_DEMO_FAIL=1)",
    )
    parser.add_argument(
        "--keep-cluster",
        action="store_true",
        default=os.environ.get("T9K_DEMO_KEEP") == "1",
        help="leave the local cluster running after the run, to browse the TensorBoard and the console "
        "(also: T9K_DEMO_KEEP=1); `t9k-local down --state-dir <home>/cluster` stops it",
    )
    args = parser.parse_args(argv)

    home: Path = args.home.resolve()
    airflow_home, data_root = home / "airflow", home / "data"
    for path in (airflow_home, data_root):
        path.mkdir(parents=True, exist_ok=True)
    # The user's own Airflow settings (a Postgres metadata DB, another dags folder...) must not leak in.
    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    base["PATH"] = f"{venv_bin()}{os.pathsep}{os.environ.get('PATH', '')}"
    base["T9K_DEMO_FAIL"] = "1" if args.fail_training else "0"
    signal.signal(signal.SIGTERM, _interrupt)  # same path as Ctrl-C: the cluster is stopped on the way out

    if not namespaces_available():
        say(
            "error: the local cluster cannot isolate pods here: its replicas need network namespaces "
            "(service names such as <job>-worker-0) and mount namespaces (the /data and /workspace "
            "volumes), which need root, `ip` (iproute2) and `unshare`. Run as root, e.g. in a container "
            "or VM (README: Troubleshooting)."
        )
        return 2

    started = time.monotonic()
    now = datetime.now(timezone.utc).replace(microsecond=0)
    logs = home / "logs" / now.strftime("%Y%m%dT%H%M%SZ")
    try:
        with local_cluster(home / "cluster", base, args.keep_cluster) as kubeconfig:
            connection = airflow_connection(StateDir(home / "cluster"))  # as `t9k-local connection` prints
            api_client = config.new_client_from_config(config_file=str(kubeconfig))
            gpus = node_gpus(client.CoreV1Api(api_client))
            say(f"training on {gpus} GPU(s) with NCCL" if gpus else "training on the CPU with gloo (no GPU)")
            env = airflow_env({**base, "T9K_DEMO_GPUS": str(gpus)}, airflow_home, connection, data_root)
            migrate_db(env, airflow_home)
            custom = client.CustomObjectsApi(api_client)
            with JobWatcher(custom) as watcher:
                rc = run_pipeline(env, now.isoformat(), logs)
            run_id, states, result = task_states(airflow_home)
            jobs = list(watcher.jobs.values())
            run = Run(run_id, states, result, jobs, logs, home / "cluster" / "pods", data_root)
            ok = summarize(run, client.CoreV1Api(api_client)) and rc == 0
            train = next((job for job in jobs if job.task_id == "train"), None)
            board = None
            if train is not None:
                board = find_board(custom, train.name, len(run.losses), connection)
                ok = show_board(board, train.name, home, len(run.losses)) and ok
            if board is not None and board.url and not args.keep_cluster:
                print(
                    "\n  The TensorBoard and the console stop with the cluster now; to browse them after "
                    "the run, keep the cluster up: T9K_DEMO_KEEP=1 make demo"
                )
    except DemoError as exc:
        say(f"error: {exc}")
        return 2
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    say(f"{'succeeded' if ok else 'FAILED'} in {time.monotonic() - started:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
