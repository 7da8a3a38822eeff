"""Hypothesis strategies that build valid manifests of every kind."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

API = "batch.tensorstack.dev/v1beta1"

names = st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True)
words = st.text(alphabet="abcxyz0123-_./=", min_size=1, max_size=8)
argv = st.lists(words, min_size=1, max_size=3)
# torchrun options as `colossalai run --extra_launch_args` can carry them (one '=' at most, no ',')
torch_args = st.lists(st.from_regex(r"--[a-z_]{1,8}(=[a-z0-9./]{1,6})?", fullmatch=True), max_size=2)
timestamps = st.sampled_from(["2026-01-01T00:00:00Z", "2026-11-21T06:30:00Z"])


def obj(
    required: dict[str, Any] | None = None, **optional: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(required or {}, optional=optional)


def template(container: str) -> st.SearchStrategy[dict]:
    main = obj(
        {"name": st.just(container), "image": names},
        command=argv,
        args=argv,
        env=st.lists(
            obj({"name": st.from_regex(r"[A-Z][A-Z_]{0,5}", fullmatch=True), "value": words}), max_size=2
        ),
        resources=st.just({"limits": {"cpu": 1, "memory": "1Gi"}}),
    )
    sidecar = obj({"name": st.just("sidecar"), "image": names})
    containers = st.tuples(main, st.lists(sidecar, max_size=1)).map(lambda t: [t[0], *t[1]])
    return obj(
        {"spec": obj({"containers": containers}, restartPolicy=st.sampled_from(["Never", "OnFailure"]))}
    )


def scheduler() -> st.SearchStrategy[dict]:
    return obj({"t9kScheduler": obj({"queue": names}, priority=st.integers(0, 100))})


def run_mode(types: list[str]) -> st.SearchStrategy[dict]:
    type_ = st.sampled_from(types)
    debug = obj(
        enabled=st.booleans(),
        replicaSpecs=st.lists(
            obj({"type": type_}, skipInitContainer=st.booleans(), command=argv), max_size=2
        ),
    )
    pause = obj(
        enabled=st.booleans(),
        resumeSpecs=st.lists(
            obj({"type": type_}, skipInitContainer=st.booleans(), command=argv, args=argv), max_size=2
        ),
    )
    return obj(debug=debug, pause=pause)


def run_policy() -> st.SearchStrategy[dict]:
    return obj(
        activeDeadlineSeconds=st.integers(1, 10**6),
        backoffLimit=st.integers(0, 10),
        cleanUpPolicy=st.sampled_from(["All", "Unfinished", "None"]),
    )


def job_status(types: list[str]) -> st.SearchStrategy[dict]:
    phase = st.sampled_from(["Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown"])
    condition = obj(
        {
            "type": st.sampled_from(
                ["Initialized", "Running", "ReplicaFailure", "Completed", "Failed", "Paused"]
            ),
            "status": st.sampled_from(["True", "False", "Unknown"]),
        },
        reason=words,
        message=words,
        lastTransitionTime=timestamps,
    )
    container = obj(
        {"name": names}, state=st.sampled_from(["Running", "Terminated"]), exitCode=st.integers(0, 255)
    )
    replica = obj(
        {"name": names},
        uid=names,
        phase=st.sampled_from(
            ["Creating", "Pending", "Running", "Succeeded", "Failed", "Unknown", "Deleted"]
        ),
        restartCount=st.integers(0, 5),
        containers=st.lists(container, max_size=2),
    )
    task = obj(
        {"type": st.sampled_from(types)},
        restartCount=st.integers(0, 9),
        replicas=st.lists(replica, max_size=2),
    )
    counts = {
        k: st.integers(0, 9) for k in ("creating", "pending", "running", "succeeded", "failed", "unknown")
    }
    tensorboard = obj(
        dependent=obj(apiVersion=st.just("tensorstack.dev/v1beta1"), kind=st.just("TensorBoard"), name=names),
        ready=st.booleans(),
        reason=words,
        action=st.just("NOP"),
        note=words,
        type=st.sampled_from(["Normal", "Warning"]),
    )
    return obj(
        phase=phase,
        conditions=st.lists(condition, max_size=3),
        tasks=st.lists(task, max_size=2),
        aggregate=obj(**counts, deleted=st.integers(0, 9)),
        backoffCount=st.integers(0, 9),
        tensorboard=tensorboard,
        startTime=timestamps,
        completionTime=timestamps,
        observedGeneration=st.integers(1, 9),
    )


def manifest(
    kind: str, spec: st.SearchStrategy[dict], status: st.SearchStrategy[dict]
) -> st.SearchStrategy[dict]:
    meta = obj({"name": names}, namespace=names, labels=st.just({"team": "ml"}))
    return obj(
        {"apiVersion": st.just(API), "kind": st.just(kind), "metadata": meta, "spec": spec}, status=status
    )


@st.composite
def generic_jobs(draw: st.DrawFn) -> dict:
    types = draw(st.lists(names, min_size=1, max_size=3, unique=True))
    counts = {t: draw(st.integers(1, 3)) for t in types}
    rank = {
        t: st.integers(0, n - 1).flatmap(lambda r: st.sampled_from([r, str(r)])) for t, n in counts.items()
    }
    rule = st.lists(st.sampled_from(types), min_size=1, max_size=2, unique=True).flatmap(
        lambda ts: st.fixed_dictionaries({t: st.lists(rank[t], min_size=1, max_size=2) for t in ts})
    )
    replica_specs = [
        draw(
            obj(
                {"type": st.just(t), "replicas": st.just(counts[t]), "template": template(draw(names))},
                restartPolicy=obj(
                    policy=st.sampled_from(["Never", "OnFailure", "Always"]), limit=st.integers(0, 5)
                ),
            )
        )
        for t in types
    ]
    ports = st.lists(names, max_size=2, unique=True).flatmap(
        lambda ns: st.tuples(
            *[
                obj(
                    {"name": st.just(n), "port": st.integers(1, 65535)},
                    protocol=st.sampled_from(["TCP", "UDP"]),
                    targetPort=st.one_of(st.integers(1, 65535), names),
                )
                for n in ns
            ]
        ).map(list)
    )
    spec = obj(
        {"replicaSpecs": st.just(replica_specs)},
        successRules=st.lists(rule, max_size=2),
        failureRules=st.lists(rule, max_size=2),
        service=obj({"ports": ports}),
        cleanUpPolicy=st.sampled_from(["All", "Unfinished", "None"]),
        runMode=run_mode(types),
        scheduler=scheduler(),
    )
    return draw(manifest("GenericJob", spec, job_status(types)))


def _training_replicas(
    types: list[str], container: st.SearchStrategy[str], pytorch: bool
) -> st.SearchStrategy:
    def one(t: str) -> st.SearchStrategy[dict]:
        extra = {"scalingWeight": st.integers(0, 5)} if pytorch else {}
        return container.flatmap(
            lambda c: obj(
                {"type": st.just(t), "template": template(c)},
                replicas=st.just(1) if t in ("chief", "master") else st.integers(1, 4),
                restartPolicy=st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"]),
                **extra,
            )
        )

    return st.tuples(*[one(t) for t in types]).map(list)


tensorboard_spec = obj(
    image=names,
    trainingLogFilesets=st.lists(names.map(lambda n: f"t9k://pvc/{n}/log"), max_size=2),
    logDir=obj(pvc=st.lists(obj({"name": names}, subPath=st.lists(names, max_size=2)), max_size=2)),
    resources=st.just({"limits": {"cpu": "100m"}}),
)


@st.composite
def pytorch_jobs(draw: st.DrawFn) -> dict:
    types = draw(st.lists(names, min_size=1, max_size=2, unique=True))
    torchrun_fields = obj(
        maxRestarts=st.integers(0, 10),
        procPerNode=st.one_of(st.just("gpu"), st.integers(1, 8), st.integers(1, 8).map(str)),
        rdzvBackend=st.sampled_from(["c10d", "etcd", "etcd-v2"]),
        extraOptions=st.lists(words, max_size=2),
        minNodes=st.integers(1, 4),
    )
    required: dict[str, Any] = {
        "replicaSpecs": _training_replicas(types, st.sampled_from(["pytorch", "python", "main"]), True)
    }
    optional: dict[str, Any] = {
        "tensorboardSpec": tensorboard_spec,
        "runPolicy": run_policy(),
        "runMode": run_mode(types),
        "scheduler": scheduler(),
    }
    if draw(st.booleans()):  # torchrun, and with it optionally elastic
        required["torchrunConfig"] = torchrun_fields.map(lambda f: {"enabled": True, **f})
        optional["elastic"] = st.integers(1, 4).flatmap(
            lambda low: obj(
                {"enabled": st.booleans(), "minReplicas": st.just(low), "maxReplicas": st.integers(low, 8)},
                expectedReplicas=st.integers(1, 8),
            )
        )
    else:
        optional["torchrunConfig"] = st.tuples(obj(enabled=st.just(False)), torchrun_fields).map(
            lambda t: {**t[0], **t[1]}
        )
    spec = obj(required, **optional)
    return draw(manifest("PyTorchTrainingJob", spec, job_status(types)))


@st.composite
def tensorflow_jobs(draw: st.DrawFn) -> dict:
    types = draw(
        st.lists(st.sampled_from(["chief", "worker", "ps", "evaluator"]), min_size=1, max_size=4, unique=True)
    )
    spec = obj(
        {"replicaSpecs": _training_replicas(types, st.just("tensorflow"), False)},
        tensorboardSpec=tensorboard_spec,
        runPolicy=run_policy(),
        runMode=run_mode(types),
        scheduler=scheduler(),
    )
    return draw(manifest("TensorFlowTrainingJob", spec, job_status(types)))


@st.composite
def xgboost_jobs(draw: st.DrawFn) -> dict:
    types = draw(st.sampled_from([["master"], ["master", "worker"], ["worker", "master"]]))
    spec = obj(
        {"replicaSpecs": _training_replicas(types, st.just("xgboost"), False)},
        runPolicy=run_policy(),
        runMode=run_mode(types),
        scheduler=scheduler(),
    )
    return draw(manifest("XGBoostTrainingJob", spec, job_status(types)))


ssh_types = ["launcher", "worker"]
paths = names.map(lambda n: f"/opt/{n}")


def _launcher_worker(worker_container: str, launcher: st.SearchStrategy[dict]) -> st.SearchStrategy[list]:
    restart = obj(policy=st.sampled_from(["Never", "OnFailure", "Always"]), limit=st.integers(0, 3))
    worker = obj(
        {"type": st.just("worker"), "template": template(worker_container)},
        replicas=st.integers(1, 4),
        restartPolicy=restart,
    )
    launcher_spec = obj(
        {"type": st.just("launcher"), "template": launcher}, replicas=st.just(1), restartPolicy=restart
    )
    return st.one_of(
        st.tuples(worker).map(list),
        st.tuples(worker, launcher_spec).map(list),
        st.tuples(launcher_spec, worker).map(list),
    )


def mpi_jobs() -> st.SearchStrategy[dict]:
    common = {
        "ssh": obj(sshAuthMountPath=paths, sshdPath=st.just("/usr/sbin/sshd")),
        "runPolicy": obj(cleanUpWorkers=st.booleans()),
        "runMode": run_mode(ssh_types),
        "scheduler": scheduler(),
    }
    mca = st.dictionaries(names, words, max_size=2)
    documented = obj(
        {
            "worker": obj(
                {"cmd": argv, "template": template("mpi-worker")},
                replicas=st.integers(1, 4),
                extraMPIArgs=st.lists(words, max_size=3),
                processesPerWorker=st.integers(1, 4),
                processRecovery=obj(enabled=st.booleans(), limit=st.integers(0, 100)),
            )
        },
        mca=mca,
        mpiHome=paths,
        **common,
    )
    replica_specs = obj(
        {
            "mpiConfig": obj({"script": argv}, mca=mca, home=paths, extraArgs=st.lists(words, max_size=3)),
            "replicaSpecs": _launcher_worker("worker", st.one_of(st.just({}), template("launcher"))),
        },
        **common,
    )
    return manifest("MPIJob", st.one_of(documented, replica_specs), job_status(ssh_types))


def colossalai_jobs() -> st.SearchStrategy[dict]:
    common = {
        "ssh": obj(authMountPath=paths, sshdPath=st.just("/usr/sbin/sshd")),
        "runPolicy": obj(cleanUpWorkers=st.booleans()),
        "runMode": run_mode(ssh_types),
        "scheduler": scheduler(),
    }
    documented = obj(
        {
            "launcher": obj(
                {"image": names},
                workingDir=paths,
                env=st.lists(obj({"name": st.just("A"), "value": words}), max_size=1),
                resources=st.just({"requests": {"cpu": "500m"}}),
            ),
            "worker": obj(
                {"command": argv, "template": template("worker")},
                replicas=st.integers(1, 4),
                procPerWorker=st.integers(1, 8),
                torchArgs=torch_args,
            ),
        },
        **common,
    )
    replica_specs = obj(
        {
            "torchConfig": obj({"script": argv}, procPerWorker=st.integers(1, 8), extraArgs=torch_args),
            "replicaSpecs": _launcher_worker("worker", template("launcher")),
        },
        **common,
    )
    return manifest("ColossalAIJob", st.one_of(documented, replica_specs), job_status(ssh_types))


def deepspeed_jobs() -> st.SearchStrategy[dict]:
    program = st.one_of(words, argv)
    run = st.sampled_from(["python", "module", "exec"]).flatmap(lambda k: st.fixed_dictionaries({k: program}))
    config = obj(
        {"run": run},
        slotsPerWorker=st.integers(1, 8),
        localRank=st.booleans(),
        autotune=st.sampled_from(["none", "run", "tune"]),
        otherArgs=st.lists(
            st.sampled_from(["--no_ssh_check", "--launcher=pdsh", "--bind_cores_to_rank"]), max_size=2
        ),
        customCommand=words,
    )
    elastic = st.integers(1, 4).flatmap(
        lambda low: obj(
            {"enabled": st.booleans(), "minReplicas": st.just(low), "maxReplicas": st.integers(low, 8)},
            expectedReplicas=st.integers(1, 8),
        )
    )
    spec = obj(
        {
            "worker": obj(
                {"template": template("worker")},
                replicas=st.integers(1, 4),
                restartPolicy=st.sampled_from(["Never", "OnFailure", "Always", "ExitCode"]),
            ),
            "config": config,
        },
        disableCustomEnv=st.booleans(),
        elastic=elastic,
        runPolicy=run_policy(),
        runMode=run_mode(["worker"]),
        scheduler=scheduler(),
    )
    return manifest("DeepSpeedJob", spec, job_status(["worker"]))


def beam_jobs() -> st.SearchStrategy[dict]:
    pod = obj(phase=st.sampled_from(["Running", "Succeeded"]), reference=obj(name=names, uid=names))
    status = obj(
        phase=st.sampled_from(["Initializing", "Running", "Succeeded", "Failed", "Unknown"]),
        conditions=st.lists(
            obj(
                {
                    "type": st.sampled_from(["ClusterRunning", "JobRunning"]),
                    "status": st.sampled_from(["True", "False"]),
                },
                lastTransitionTime=timestamps,
            ),
            max_size=2,
        ),
        jobURL=names.map(lambda n: f"/t9k/flink-cluster/{n}/"),
        flinkClusterStatus=obj(
            jobManagerStatus=st.lists(pod, max_size=1), taskManagerStatus=st.lists(pod, max_size=2)
        ),
        jobStatus=st.lists(pod, max_size=2),
        startTime=timestamps,
    )
    spec = obj(
        {
            "flinkClusterTemplate": obj(
                {"spec": st.just({"flinkVersion": "1.10.1", "taskManager": {"replicas": 2}})},
                metadata=st.just({"labels": {"a": "b"}}),
            ),
            "jobTemplate": template("submit").map(lambda t: {"spec": {"template": t, "backoffLimit": 2}}),
        },
        runPolicy=obj(cleanUpCluster=st.booleans()),
        runMode=obj(debug=obj(enabled=st.just(False)), pause=obj(enabled=st.just(False))),  # immediate only
        scheduler=scheduler(),
    )
    return manifest("BeamJob", spec, status)


STRATEGIES: dict[str, st.SearchStrategy[dict]] = {
    "GenericJob": generic_jobs(),
    "PyTorchTrainingJob": pytorch_jobs(),
    "TensorFlowTrainingJob": tensorflow_jobs(),
    "XGBoostTrainingJob": xgboost_jobs(),
    "MPIJob": mpi_jobs(),
    "ColossalAIJob": colossalai_jobs(),
    "DeepSpeedJob": deepspeed_jobs(),
    "BeamJob": beam_jobs(),
}
