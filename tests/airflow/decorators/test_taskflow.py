"""The ``@task.t9k*`` decorators without a cluster: what is shipped, bad input, the generated manifests, the
runner's protocol (run here as the replicas run it) and the operator's reading of results and failures.

The cluster runs are in ``test_taskflow_on_cluster.py``.
"""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import DAG, AirflowException, AirflowFailException, task

from t9k_provider.decorators import manifests, runner, transport
from t9k_provider.decorators.operator import T9kDecoratedOperator
from t9k_provider.decorators.source import ship
from t9k_provider.decorators.tasks import t9k_pytorch_task
from t9k_provider.jobclient import identity as ident
from t9k_provider.jobs import API_VERSION, load
from t9k_provider.kube.podlogs import parse_lines
from tests.airflow.fakes import FakeHook, FakeTI
from tests.support.builders import replica_pod, terminated

pytestmark = pytest.mark.timeout(60)

SUCCEEDED = ("Succeeded", (("Completed", "Succeeded", "The job has finished successfully."),))
FAILED = ("Failed", (("Failed", "Failed", "The job is failed with rule: { worker: [1] }"),))
DECORATORS = ["t9k", "t9k_pytorch", "t9k_tensorflow", "t9k_xgboost", "t9k_deepspeed"]


# -- functions to ship (module level, nothing from this module's globals) ----------------------------------


def scale(values: list[float], factor: float = 2.0) -> dict[str, Any]:
    import statistics

    return {"mean": statistics.mean(v * factor for v in values)}


if True:  # indented, as a function in a `with DAG(...)` block is

    def indented(x: int) -> int:
        """The `if 1:` header keeps this compiling unchanged."""
        return x + 1


def uses_module_global() -> str:
    return json.dumps({})


LIMIT = 3


def default_from_module(n: int = LIMIT) -> int:
    return n


def generator() -> Iterator[int]:
    yield 1


async def coroutine() -> int:
    return 1


def returns_set() -> set[int]:
    return {1}


@pytest.fixture
def dag() -> Iterator[DAG]:
    with DAG("taskflow_unit", schedule=None) as dag:
        yield dag


# -- the shipped source --------------------------------------------------------------------------------------


@pytest.mark.parametrize("function", [scale, indented])
def test_shipped_source_defines_the_function_at_its_own_line_numbers(function: Any) -> None:
    shipped = ship(function)
    assert shipped.filename == __file__ and "@" not in shipped.source.split("def ")[0]
    namespace: dict[str, Any] = {}
    exec(compile(shipped.source, shipped.filename, "exec"), namespace)
    remote = namespace[function.__name__]
    assert remote.__code__.co_firstlineno == function.__code__.co_firstlineno
    args = [[1.0, 2.0]] if function is scale else [1]
    assert remote(*args) == function(*args)


@t9k_pytorch_task(workers=2)
def decorated() -> int:
    return 1


def test_decorators_are_stripped() -> None:
    shipped = ship(decorated.function)
    assert "@t9k" not in shipped.source and "def decorated() -> int:" in shipped.source


def nested_factory(offset: int) -> Any:
    def nested() -> int:
        return offset

    return nested


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (lambda: 1, "a lambda cannot be shipped"),
        (nested_factory(1), "nested() is nested in nested_factory() and uses its variables offset"),
        (generator, "generator() is a generator"),
        (coroutine, "coroutine() is a coroutine function"),
        (uses_module_global, "uses json from the DAG file's module"),
        (default_from_module, "uses LIMIT from the DAG file's module"),
        (FakeTI.xcom_push, "FakeTI.xcom_push() is a method"),
        (len, "is not a Python function"),
    ],
)
def test_functions_that_cannot_stand_alone_are_rejected(function: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ship(function)
    assert message in str(caught.value)


# -- bad input fails when the DAG file is parsed -------------------------------------------------------------


@pytest.mark.parametrize(
    ("decorator", "options", "error", "message"),
    [
        (
            "t9k",
            {"workers": 2},
            TypeError,
            "@task.t9k has no option 'workers' (an option of @task.t9k_pytorch",
        ),
        ("t9k_pytorch", {"workers": 0}, ValueError, "workers must be a positive integer, got 0"),
        ("t9k_deepspeed", {"slots_per_worker": -1}, ValueError, "slots_per_worker must be a positive"),
        ("t9k_pytorch", {"replicas": 2}, TypeError, "has no option 'replicas' (an option of @task.t9k)"),
        ("t9k_xgboost", {"nproc_per_node": 2}, TypeError, "has no option 'nproc_per_node'"),
        ("t9k", {"run_policy": {"backoffLimit": 1}}, TypeError, "a GenericJob has none"),
        (
            "t9k",
            {"serializer": "yaml"},
            ValueError,
            "serializer: 'yaml' is not one of json, cloudpickle, dill",
        ),
        ("t9k", {"wait_for_completion": False}, TypeError, "takes no 'wait_for_completion'"),
        ("t9k", {"manifest": {}}, TypeError, "takes no 'manifest'"),
        ("t9k", {"on_finish_action": "drop"}, ValueError, "on_finish_action: 'drop' is not one of"),
    ],
)
def test_bad_options_fail_when_the_decorator_is_applied(
    decorator: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as caught:
        getattr(task, decorator)(**options)
    assert message in str(caught.value)


def test_a_lambda_fails_when_decorated() -> None:
    with pytest.raises(ValueError, match="a lambda cannot be shipped"):
        task.t9k(lambda: 1)


def test_bad_options_of_a_mapped_task_fail_at_parse_time(dag: DAG) -> None:
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        task.t9k_tensorflow(workers=0)(echo).expand(value=[0.1, 0.2])
    task.t9k_tensorflow(workers=1)(echo).expand(value=[0.1, 0.2])  # builds no operator until it runs
    with pytest.raises(ValueError, match="nested in"):
        task.t9k_tensorflow(workers=1)(nested_factory(1)).expand(value=[0.1, 0.2])


# -- the manifests -------------------------------------------------------------------------------------------


def build(decorator: str, dag: DAG, **options: Any) -> T9kDecoratedOperator:
    return getattr(task, decorator)(**options)(scale)([1.0], factor=3.0).operator


@pytest.mark.parametrize("decorator", DECORATORS)
def test_generated_manifest_validates_and_names_no_job(decorator: str, dag: DAG) -> None:
    op = build(decorator, dag)
    recipe = manifests.RECIPES[decorator]
    assert isinstance(op, T9kDecoratedOperator) and op.job_kind == recipe.kind == op.manifest["kind"]
    assert op.manifest["apiVersion"] == API_VERSION and "metadata" not in op.manifest
    job = load(manifests.with_call(op.manifest, "r", "c"))
    assert recipe.kind == job.KIND
    text = json.dumps(op.manifest)
    assert manifests.RUNNER_PATH in text and manifests.INIT_CONTAINER in text
    assert f'"name": "{recipe.container}"' in text


def test_common_options_reach_the_training_container(dag: DAG) -> None:
    op = build(
        "t9k_pytorch",
        dag,
        workers=3,
        image="registry.example/train:1",
        container_resources={"limits": {"cpu": "2"}},
        env={"DATA": "/data"},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}],
        volume_mounts=[{"name": "data", "mountPath": "/data"}],
        run_policy={"activeDeadlineSeconds": 600},
        scheduler={"t9kScheduler": {"queue": "gpu", "priority": 10}},
        nproc_per_node=2,
    )
    job = load(manifests.with_call(op.manifest, "r", "c"))
    (replica,) = job.spec.replica_specs
    assert replica.type == "worker" and replica.replicas == 3 and replica.restart_policy == "Never"
    (main,) = replica.template["spec"]["containers"]
    assert main["image"] == "registry.example/train:1" and main["resources"] == {"limits": {"cpu": "2"}}
    assert main["env"] == [{"name": "DATA", "value": "/data"}]
    assert main["command"] == ["python", "-u"]
    assert main["args"] == [manifests.RUNNER_PATH, manifests.CALL_PATH]
    assert [m["mountPath"] for m in main["volumeMounts"]] == ["/data", manifests.MOUNT]
    assert [v["name"] for v in replica.template["spec"]["volumes"]] == ["data", manifests.VOLUME]
    assert job.spec.run_policy.active_deadline_seconds == 600 and job.spec.run_policy.backoff_limit == 0
    assert job.spec.run_policy.clean_up_policy == "Unfinished"
    assert job.spec.scheduler.t9k_scheduler.queue == "gpu"
    assert job.spec.torchrun_config.enabled and job.spec.torchrun_config.proc_per_node == 2


def test_kind_layouts(dag: DAG) -> None:
    xgboost = load(manifests.with_call(build("t9k_xgboost", dag, workers=2).manifest, "r", "c"))
    assert [(r.type, r.replicas) for r in xgboost.spec.replica_specs] == [("master", 1), ("worker", 2)]
    deepspeed = build("t9k_deepspeed", dag, workers=2, slots_per_worker=4)
    spec = load(manifests.with_call(deepspeed.manifest, "r", "c")).spec
    assert spec.worker.replicas == 2 and spec.config.slots_per_worker == 4
    assert spec.config.run.argv() == [manifests.RUNNER_PATH, manifests.CALL_PATH]
    assert not spec.config.local_rank
    generic = build("t9k", dag, replicas=2).manifest
    env = generic["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "RANK", "value": "$(rank)"} in env


def _training_container(manifest: dict[str, Any]) -> dict[str, Any]:
    spec = manifest["spec"]
    template = spec["worker"]["template"] if "worker" in spec else spec["replicaSpecs"][-1]["template"]
    return template["spec"]["containers"][0]


@pytest.mark.parametrize("decorator", DECORATORS)
def test_gpus_are_the_training_containers_request_and_limit(decorator: str, dag: DAG) -> None:
    op = build(decorator, dag, gpus=2, container_resources={"limits": {"cpu": "4"}})
    load(manifests.with_call(op.manifest, "r", "c"))  # the job model accepts it
    resources = _training_container(op.manifest)["resources"]
    assert resources == {"limits": {"cpu": "4", "nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}


def test_several_gpus_start_a_process_each_unless_told_otherwise(dag: DAG) -> None:
    """One torchrun process (one DeepSpeed rank) per GPU of the replica; nproc_per_node and slots_per_worker
    still decide when given."""

    def spec(decorator: str, **options: Any) -> dict[str, Any]:
        return build(decorator, dag, **options).manifest["spec"]

    assert spec("t9k_pytorch", workers=2, gpus=4)["torchrunConfig"] == {
        "enabled": True,
        "procPerNode": 4,
        "maxRestarts": 0,
    }
    assert spec("t9k_pytorch", gpus=4, nproc_per_node=1)["torchrunConfig"]["procPerNode"] == 1
    assert "torchrunConfig" not in spec("t9k_pytorch", gpus=1)
    assert spec("t9k_deepspeed", gpus=4)["config"]["slotsPerWorker"] == 4
    assert spec("t9k_deepspeed", gpus=4, slots_per_worker=2)["config"]["slotsPerWorker"] == 2
    assert spec("t9k_deepspeed")["config"]["slotsPerWorker"] == 1


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"gpus": -1}, ValueError, "gpus must be a whole number"),
        ({"gpus": 1.5}, ValueError, "gpus must be a whole number"),
        ({"gpus": True}, ValueError, "gpus must be a whole number"),
        (
            {"gpus": 1, "container_resources": {"limits": {"nvidia.com/gpu": "1"}}},
            TypeError,
            "container_resources.limits[nvidia.com/gpu] both ask for GPUs",
        ),
    ],
)
def test_bad_gpus_fail_when_the_decorator_is_applied(options: dict, error: type, words: str) -> None:
    with pytest.raises(error, match=re.escape(words)):
        task.t9k_pytorch(**options)


def test_manifest_override_is_deep_merged(dag: DAG) -> None:
    override = {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {
            "runPolicy": {"backoffLimit": 2},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "template": {
                        "metadata": {"annotations": {"a": "b"}},
                        "spec": {
                            "containers": [{"name": "pytorch", "env": [{"name": "EXTRA", "value": "1"}]}],
                            "nodeSelector": {"gpu": "a100"},
                        },
                    },
                }
            ],
        },
    }
    manifest = build("t9k_pytorch", dag, env={"DATA": "/data"}, manifest_override=override).manifest
    job = load(manifests.with_call(manifest, "r", "c"))
    assert manifest["metadata"] == {"labels": {"team": "ml"}}
    (replica,) = job.spec.replica_specs
    (main,) = replica.template["spec"]["containers"]
    assert [e["name"] for e in main["env"]] == ["DATA", "EXTRA"] and main["image"]  # merged, image kept
    assert replica.template["spec"]["nodeSelector"] == {"gpu": "a100"}
    assert job.spec.run_policy.backoff_limit == 2 and job.spec.run_policy.clean_up_policy == "Unfinished"


def test_merge_rules() -> None:
    base = {"a": {"b": 1, "c": 2}, "l": [1, 2], "m": [{"mountPath": "/x", "name": "v"}]}
    override = {"a": {"c": None, "d": 3}, "l": [3], "m": [{"mountPath": "/y", "name": "v"}]}
    assert manifests.merge(base, override) == {
        "a": {"b": 1, "d": 3},
        "l": [3],
        "m": [{"mountPath": "/x", "name": "v"}, {"mountPath": "/y", "name": "v"}],
    }


def test_rendering_ships_the_resolved_call(dag: DAG) -> None:
    op = build("t9k", dag)
    op.op_kwargs = {"factor": "{{ params.factor }}"}
    op.render_template_fields({"params": {"factor": "4"}, "ti": FakeTI()})
    (value,) = [
        e["value"]
        for e in op.manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["initContainers"][0]["env"]
        if e["name"] == manifests.CALL_ENV
    ]
    call = json.loads(transport.unpack(value))
    assert call["function"] == "scale" and call["serializer"] == "json"
    assert call["arguments"] == {"args": [[1.0]], "kwargs": {"factor": "4"}}
    assert "def scale" in call["source"] and call["filename"] == __file__


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ([{1, 2}], {}, "positional argument 0 is a builtins.set, which JSON cannot carry"),
        ([], {"values": {1: "a"}}, "argument 'values' has the key 1 (int): JSON keys are strings"),
    ],
)
def test_arguments_that_json_cannot_carry(args: list[Any], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(transport.CallError) as caught:
        transport.encode_call(ship(scale), "json", args, kwargs)
    assert message in str(caught.value)


def test_a_call_over_the_size_limit_is_refused() -> None:
    incompressible = base64.b64encode(random.Random(0).randbytes(150_000)).decode()
    with pytest.raises(transport.CallError) as caught:
        transport.encode_call(ship(scale), "json", [incompressible], {})
    assert f"over the {transport.MAX_CALL_CHARS} a container's environment value" in str(caught.value)


def test_unshippable_arguments_fail_the_task_without_retry(dag: DAG) -> None:
    op = build("t9k", dag)
    op.op_args = [object()]
    with pytest.raises(AirflowFailException, match=r"positional argument 0 is a builtins\.object"):
        op.render_template_fields({"ti": FakeTI()})


# -- the runner, as a replica runs it ------------------------------------------------------------------------


def run_runner(
    tmp_path: Path, function: Any, *args: Any, serializer: str = "json", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "runner.py").write_bytes(transport.unpack(transport.packed_runner()))
    call = transport.encode_call(ship(function), serializer, list(args), {})
    (tmp_path / "call.json").write_bytes(transport.unpack(call))
    return subprocess.run(
        [sys.executable, str(tmp_path / "runner.py"), str(tmp_path / "call.json")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", **(env or {})},
    )


def test_rank_zero_prints_the_result(tmp_path: Path) -> None:
    done = run_runner(tmp_path, scale, [1.0, 3.0], env={"RANK": "0"})
    assert done.returncode == 0, done.stderr
    assert transport.decode_result(done.stdout.splitlines(), "json") == {"mean": 4.0}


def test_other_ranks_print_no_result(tmp_path: Path) -> None:
    done = run_runner(tmp_path, scale, [1.0], env={"RANK": "1"})
    assert done.returncode == 0 and runner.RESULT_MARKER not in done.stdout


@pytest.mark.parametrize(
    ("tf_config", "rank"),
    [
        ({"cluster": {"worker": ["w0", "w1"]}, "task": {"type": "worker", "index": 0}}, 0),
        ({"cluster": {"worker": ["w0", "w1"]}, "task": {"type": "worker", "index": 1}}, 1),
        ({"cluster": {"chief": ["c"], "worker": ["w0"]}, "task": {"type": "worker", "index": 0}}, 1),
        ({"cluster": {"chief": ["c"], "worker": ["w0"]}, "task": {"type": "chief", "index": 0}}, 0),
    ],
)
def test_tensorflow_rank_comes_from_tf_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tf_config: dict[str, Any], rank: int
) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))
    assert runner.global_rank() == rank


def test_a_raising_function_reports_its_traceback_and_exits_1(tmp_path: Path) -> None:
    done = run_runner(tmp_path, scale, "not numbers", env={"RANK": "1"})
    assert done.returncode == 1
    (error,) = transport.remote_errors(parse_lines(done.stderr))
    assert error.retryable
    assert error.text.startswith("scale() on rank 1 (replica ") and "raised TypeError" in error.text
    assert f'File "{__file__}", line {scale.__code__.co_firstlineno + 3}, in scale' in error.text
    assert 'return {"mean": statistics.mean(v * factor for v in values)}' in error.text  # the source line


def test_a_result_json_cannot_carry_is_final(tmp_path: Path) -> None:
    done = run_runner(tmp_path, returns_set, env={"RANK": "0"})
    assert done.returncode == runner.FINAL_EXIT_CODE
    (error,) = transport.remote_errors(parse_lines(done.stderr))
    assert not error.retryable and "the return value is a builtins.set, which JSON cannot carry" in error.text


def crashes_in_native_code() -> None:
    import ctypes

    ctypes.string_at(0)  # reads address 0: SIGSEGV


def test_a_rank_that_crashes_in_native_code_leaves_its_python_stack(tmp_path: Path) -> None:
    """A segfault (a collective's teardown, say) names no Python frame by itself: the runner's fault handler
    writes every thread's stack to stderr, which the task's failure message shows."""
    done = run_runner(tmp_path, crashes_in_native_code, env={"RANK": "1"})
    assert done.returncode == -11
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert "in crashes_in_native_code" in done.stderr


def make_big() -> str:
    import os

    return os.urandom(300 * 1024).hex()


def test_a_result_over_the_limit_is_final(tmp_path: Path) -> None:
    done = run_runner(tmp_path, make_big, env={"RANK": "0"})
    assert done.returncode == runner.FINAL_EXIT_CODE
    (error,) = transport.remote_errors(parse_lines(done.stderr))
    assert not error.retryable and f"over the {runner.RESULT_LIMIT_BYTES}-byte limit" in error.text


def echo(value: Any) -> Any:
    return value


def test_pickling_serializers_carry_what_json_cannot(tmp_path: Path) -> None:
    pytest.importorskip("dill")
    done = run_runner(tmp_path, echo, {1, 2}, serializer="dill", env={"RANK": "0"})
    assert done.returncode == 0, done.stderr
    assert transport.decode_result(done.stdout.splitlines(), "dill") == {1, 2}


def test_long_results_are_chunked_and_prefixed_lines_parse() -> None:
    text = runner.encode_result(base64.b64encode(random.Random(1).randbytes(20_000)).decode(), None)
    lines = text.splitlines()
    assert len(lines) > 1 and all(len(line) < 16 * 1024 for line in lines)
    prefixed = [f"worker-0: {line}" for line in lines]  # as pdsh gathers them
    assert len(transport.decode_result(prefixed, "json")) > 20_000
    with pytest.raises(ValueError, match="incomplete"):
        transport.decode_result(prefixed[1:], "json")


def test_error_reports_gathered_by_pdsh_lose_the_host_prefix() -> None:
    log = "\n".join(
        [
            "2026-01-01T00:00:01Z worker-1: T9K_TASKFLOW_ERROR retryable f() on rank 1 raised KeyError",
            "2026-01-01T00:00:01Z worker-1: Traceback (most recent call last):",
            "2026-01-01T00:00:01Z worker-0: unrelated",
            "2026-01-01T00:00:01Z worker-1: KeyError: 'x'",
            "2026-01-01T00:00:01Z worker-1: T9K_TASKFLOW_ERROR_END",
        ]
    )
    (error,) = transport.remote_errors(parse_lines(log))
    assert error.text.splitlines()[0] == "f() on rank 1 raised KeyError"
    assert "KeyError: 'x'" in error.text.splitlines()


# -- the operator: results and failures, against an in-memory hook ------------------------------------------


def prepared(hook: FakeHook, dag: DAG, logs: dict[int, str], phase: tuple[str, Any], **options: Any) -> Any:
    """A two-replica ``@task.t9k`` operator: its job will show ``phase``, its replicas logged ``logs``."""
    op = task.t9k(replicas=2, poll_interval=0.01, deferrable=False, **options)(scale)([1.0]).operator
    op.__dict__["hook"] = hook
    hook.script = [phase]
    ti = FakeTI(task_id=op.task_id)
    name = op.build_manifest(ident.task_identity(ti), 1)["metadata"]["name"]
    hook.pods = [replica_pod(f"{name}-worker-{i}", "worker", i, name) for i in range(2)]
    for index, text in logs.items():
        hook.logs[(f"{name}-worker-{index}", "main")] = text
    op.render_template_fields({"ti": ti})
    return op, {"ti": ti, "run_id": ti.run_id}, name


def stamped(text: str, second: int) -> str:
    return "\n".join(f"2026-01-01T00:00:{second:02d}Z {line}" for line in text.splitlines())


def error_log(kind: str, rank: int, second: int) -> str:
    report = [
        f"{runner.ERROR_MARKER} {kind} f() on rank {rank} raised X",
        f"X: boom {rank}",
        runner.ERROR_END_MARKER,
    ]
    return stamped("\n".join(report), second)


def test_the_result_is_rank_zeros_and_the_job_is_deleted_after_reading_it(
    fake_hook: FakeHook, dag: DAG
) -> None:
    logs = {0: stamped("training...\n" + runner.encode_result({"loss": 0.5}, None) + "bye", 1)}
    op, context, name = prepared(fake_hook, dag, logs, SUCCEEDED, on_finish_action="delete_on_success")
    assert op.execute(context) == {"loss": 0.5}
    assert fake_hook.deletes() == [name]


def test_a_decorated_task_reports_its_usage(fake_hook: FakeHook, dag: DAG) -> None:
    logs = {0: stamped(runner.encode_result(1, None), 9)}
    op, context, _ = prepared(fake_hook, dag, logs, SUCCEEDED)
    terminated(fake_hook.pods[0], 0, 9, 0, gpus=1)
    terminated(fake_hook.pods[1], 0, 8, 0, gpus=1)
    assert op.execute(context) == 1
    assert context["ti"].xcoms["t9k_usage"] == {
        "replica_seconds": {"worker": 17.0, "total": 17.0},
        "gpu_seconds": {"worker": 17.0, "total": 17.0},
    }


def test_a_succeeded_job_without_a_result_fails_the_task(fake_hook: FakeHook, dag: DAG) -> None:
    op, context, name = prepared(fake_hook, dag, {0: stamped("no marker", 1)}, SUCCEEDED)
    with pytest.raises(AirflowException) as caught:
        op.execute(context)
    assert f"cannot be read from the log of {name}-worker-0 (rank 0): no result" in str(caught.value)


def test_the_earliest_remote_traceback_explains_a_failed_job(fake_hook: FakeHook, dag: DAG) -> None:
    logs = {0: error_log(runner.RETRYABLE, 0, 9), 1: error_log(runner.RETRYABLE, 1, 3)}
    op, context, _ = prepared(fake_hook, dag, logs, FAILED, retry_on_job_failure=True)
    with pytest.raises(AirflowException) as caught:
        op.execute(context)
    assert not isinstance(caught.value, AirflowFailException)  # asked for: Airflow's retries may run it again
    message = str(caught.value)
    assert message.startswith("f() on rank 1 raised X\nX: boom 1\n") and "failed: Failed" in message


@pytest.mark.parametrize(
    ("kind", "options"),
    [(runner.FINAL, {"retry_on_job_failure": True}), (runner.RETRYABLE, {})],
)
def test_failures_retrying_cannot_cure_fail_for_good(
    fake_hook: FakeHook, dag: DAG, kind: str, options: dict[str, Any]
) -> None:
    op, context, _ = prepared(fake_hook, dag, {1: error_log(kind, 1, 3)}, FAILED, **options)
    with pytest.raises(AirflowFailException, match="f\\(\\) on rank 1 raised X"):
        op.execute(context)


def test_a_failed_job_without_a_traceback_keeps_the_operators_report(fake_hook: FakeHook, dag: DAG) -> None:
    options = {"on_finish_action": "delete", "retry_on_job_failure": True}
    op, context, name = prepared(fake_hook, dag, {1: stamped("Killed", 3)}, FAILED, **options)
    with pytest.raises(AirflowException, match="failed: Failed") as caught:
        op.execute(context)
    assert not isinstance(caught.value, AirflowFailException)
    assert fake_hook.deletes() == [name]


def raised(rank: int, pod_name: str, second: int, error: str) -> str:
    """What the runner of rank ``rank`` on ``pod_name`` wrote when the function raised ``error``."""
    report = [
        f"{runner.ERROR_MARKER} {runner.RETRYABLE} f() on rank {rank} (replica {pod_name}) raised "
        + error.split(":")[0],
        "Traceback (most recent call last):",
        error,
        runner.ERROR_END_MARKER,
    ]
    return stamped("\n".join(report), second)


def test_the_traceback_of_the_rank_that_failed_first_leads_then_the_ranks_that_failed_after_it(
    fake_hook: FakeHook, dag: DAG
) -> None:
    """Rank 1 raises a distinctive error; rank 0's collective breaks two seconds later."""
    op, context, name = prepared(fake_hook, dag, {}, FAILED)
    rank0, rank1 = f"{name}-worker-0", f"{name}-worker-1"
    fake_hook.logs[(rank1, "main")] = raised(1, rank1, 1, "ValueError: shard 7 holds no samples")
    fake_hook.logs[(rank0, "main")] = raised(0, rank0, 3, "ConnectionError: connection reset by peer")
    terminated(fake_hook.pods[0], 0, 3, 1)
    terminated(fake_hook.pods[1], 0, 1, 1)
    handed: list[Any] = []
    remote_errors = op._remote_errors

    def reading(outcome: Any) -> Any:
        handed.append([p["metadata"]["name"] for p in outcome.pods or []])
        return remote_errors(outcome)

    op._remote_errors = reading
    with pytest.raises(AirflowException) as caught:
        op.execute(context)
    assert isinstance(caught.value, AirflowFailException)  # a bug in the function: failed at once, no retry
    message = str(caught.value)
    assert message.startswith(
        f"f() on rank 1 (replica {rank1}) raised ValueError\nTraceback (most recent call last):\n"
        f"ValueError: shard 7 holds no samples\n"
        f"job conn-ns/{name} failed: {rank1} failed first, at 2026-01-01T00:00:01Z: exit code 1\n"
    )
    assert (
        f"then, after it:\n  {rank0}, 2 s later: exit code 1; "
        "last line: ConnectionError: connection reset by peer\n"
    ) in message
    assert handed == [[p["metadata"]["name"] for p in fake_hook.pods]]  # the conclusion's list, not another


def test_a_rank_that_failed_first_without_a_traceback_leads_with_how_it_ended(
    fake_hook: FakeHook, dag: DAG
) -> None:
    """Rank 1 is killed for its memory (no Python error to report); rank 0 then raises a connection error:
    the kill leads, not the consequence."""
    op, context, name = prepared(fake_hook, dag, {}, FAILED)
    rank0, rank1 = f"{name}-worker-0", f"{name}-worker-1"
    fake_hook.logs[(rank1, "main")] = stamped("loading shard 7", 1)
    fake_hook.logs[(rank0, "main")] = raised(0, rank0, 3, "ConnectionError: connection reset by peer")
    terminated(fake_hook.pods[0], 0, 3, 1)
    terminated(fake_hook.pods[1], 0, 1, 137, reason="OOMKilled")
    with pytest.raises(AirflowException) as caught:
        op.execute(context)
    message = str(caught.value)
    assert message.startswith(
        f"job conn-ns/{name} failed: {rank1} failed first, at 2026-01-01T00:00:01Z: "
        "OOMKilled (exit code 137)\n"
        f"last 50 log lines of {rank1}:\n[{rank1}/main] loading shard 7\n"
    )
    assert message.endswith(
        "the function's first error, on a replica that failed after it:\n"
        f"f() on rank 0 (replica {rank0}) raised ConnectionError\nTraceback (most recent call last):\n"
        "ConnectionError: connection reset by peer"
    )


def test_a_function_using_module_names_fails_before_its_job_is_created(dag: DAG) -> None:
    op = task.t9k()(uses_module_global)().operator  # parsing does not read the source
    with pytest.raises(AirflowFailException, match="uses json from the DAG file's module"):
        op.render_template_fields({"ti": FakeTI()})


def test_strings_that_look_like_template_files_are_values(dag: DAG) -> None:
    op = build("t9k", dag, env={"CONFIG": "/etc/train.json"})
    op.render_template_fields({"ti": FakeTI()})
    env = op.manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "CONFIG", "value": "/etc/train.json"} in env


def test_arguments_that_look_like_template_files_are_values(tmp_path: Path) -> None:
    """As with plain ``@task``, an argument naming a file of the DAG's template path is passed as it is,
    neither when the DAG file is parsed (``resolve_template_files``) nor when the task renders."""
    (tmp_path / "rows.json").write_text("[1, 2]")
    with DAG("taskflow_files", schedule=None, template_searchpath=[str(tmp_path)]) as dag:
        op = task.t9k()(scale)(["rows.json"], factor="rows.json").operator
    dag.resolve_template_files()
    op.render_template_fields({"ti": FakeTI()})
    assert list(op.op_args) == [["rows.json"]] and op.op_kwargs == {"factor": "rows.json"}


def test_the_runner_is_python_3_8_with_the_standard_library_only() -> None:
    """It runs in the image's interpreter, which may be older than Airflow's and has no t9k_provider."""
    import ast

    text = Path(runner.__file__).read_text()
    tree = ast.parse(text, feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def registers_a_goodbye() -> int:
    import atexit

    atexit.register(print, "goodbye from atexit", flush=True)
    return 7


def test_the_runner_runs_atexit_handlers_then_skips_the_interpreters_teardown(tmp_path: Path) -> None:
    """A rank leaves with ``os._exit`` once Python's exit work is done: atexit handlers still run and the
    result and exit code stand, but no C++ destructor runs after them (where a joinable gloo thread would
    abort the process)."""
    done = run_runner(tmp_path, registers_a_goodbye, env={"RANK": "0"})
    assert done.returncode == 0, done.stderr
    assert runner.RESULT_MARKER in done.stdout and done.stdout.rstrip().endswith("goodbye from atexit")
    text = Path(runner.__file__).read_text()
    assert "leave(main())" in text and "os._exit(code)" in text
