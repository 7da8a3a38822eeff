"""The "T9k Job" and "TensorBoard" extra links: rendered from the operator that ran (Airflow 3), read from
XCom (Airflow 2); their templates from the operator, the connection or the ``[t9k]`` options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_provider.links import job as link_module
from t9k_provider.links.job import T9kJobLink, T9kTensorBoardLink
from t9k_provider.operators import T9kJobOperator
from t9k_provider.version_compat import AIRFLOW_V_3_0_PLUS
from tests.airflow.fakes import FakeHook, FakeTI
from tests.airflow.versions import TaskDeferralError, airflow3_only
from tests.support.builders import generic_manifest, make_container, make_job, make_template

TEMPLATE = "https://t9k.example/{namespace}/{kind}/{name}"


def make(hook: FakeHook, **kwargs: Any) -> T9kJobOperator:
    op = T9kJobOperator(task_id="train", manifest=generic_manifest(), wait_for_completion=False, **kwargs)
    op.__dict__["hook"] = hook
    return op


class NoXCom:
    """Any XCom read fails the test: on Airflow 3 the worker must not need one."""

    @staticmethod
    def get_value(**kwargs: Any) -> Any:
        raise AssertionError(f"XCom read: {kwargs}")


class StoredXCom:
    """Airflow 2's XCom table: what the task pushed (the fake TI stands in for the task instance key)."""

    @staticmethod
    def get_value(*, ti_key: Any, key: str) -> Any:
        return ti_key.xcoms.get(key)


@airflow3_only("the worker renders extra links on the operator that ran")
def test_link_comes_from_the_operator_that_ran(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "XCom", NoXCom)
    op = make(fake_hook, job_url_template=TEMPLATE)
    assert T9kJobLink().get_link(op, ti_key=ti) == ""  # nothing submitted yet: no link
    op.execute(context)
    url = f"https://t9k.example/conn-ns/GenericJob/{ti.xcoms['t9k_job']['name']}"
    assert T9kJobLink().get_link(op, ti_key=ti) == url
    assert ti.xcoms[T9kJobLink().xcom_key] == url  # stored before any wait, as Airflow 3 finalize stores it


def test_no_template_no_link(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "XCom", NoXCom if AIRFLOW_V_3_0_PLUS else StoredXCom)
    op = make(fake_hook)
    op.execute(context)
    assert T9kJobLink().get_link(op, ti_key=ti) == ""
    assert T9kJobLink().xcom_key not in ti.xcoms


def test_configured_template_is_the_default(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[t9k] job_url_template`` is read when the task runs (not for every operator a DAG parse builds)."""
    op = make(fake_hook)
    monkeypatch.setenv("AIRFLOW__T9K__JOB_URL_TEMPLATE", TEMPLATE)
    op.execute(context)
    url = f"https://t9k.example/conn-ns/GenericJob/{ti.xcoms['t9k_job']['name']}"
    assert op.job_url == url and ti.xcoms[T9kJobLink().xcom_key] == url


def test_airflow_2_webserver_reads_the_persisted_url(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "RENDERED_IN_WORKER", False)
    monkeypatch.setattr(link_module, "XCom", StoredXCom)
    make(fake_hook, job_url_template=TEMPLATE).execute(context)
    fresh = make(FakeHook())  # the webserver's copy never ran, and serialization dropped the template
    assert T9kJobLink().get_link(fresh, ti_key=ti) == ti.xcoms[T9kJobLink().xcom_key]
    no_console = FakeTI()
    make(FakeHook()).execute({"ti": no_console, "run_id": no_console.run_id})
    assert T9kJobLink().get_link(fresh, ti_key=no_console) == ""  # nothing stored: no link


DAG = """
from airflow.sdk import DAG
from t9k_provider.operators import GenericJobOperator

with DAG("link_probe", schedule=None):
    GenericJobOperator(
        task_id="bad",
        manifest={"kind": "GenericJob", "spec": {"replicaSpecs": "not a list"}},
        job_url_template="https://t9k.example/{namespace}/{name}",
    )
"""

RUN = """
import json
from airflow.utils import db
db.initdb()
from airflow.dag_processing.dagbag import DagBag
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session

run = DagBag(dag_folder={dags!r}).dags["link_probe"].test()
with create_session() as session:
    links = [x.value for x in session.scalars(XComModel.get_many(run_id=run.run_id, key="_link_T9kJobLink"))]
print("RESULT " + json.dumps({{"state": str(run.state), "links": links}}))
"""


@airflow3_only("the task runner asks every extra link for its URL when the task ends (Airflow 3.3)")
@pytest.mark.timeout(300)
def test_task_failing_before_submission_logs_no_xcom_error(tmp_path: Path) -> None:
    """Airflow 3.3's task runner asks every extra link for its URL when the task ends; a failed task must not
    make it log ``XCom not found`` for a link that could never exist."""
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "link_probe.py").write_text(DAG)
    bundle = [
        {
            "name": "dags-folder",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(dags), "refresh_interval": 0},
        }
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "home"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST=json.dumps(bundle),
    )
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RUN.format(dags=str(dags)))],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    output = out.stdout + out.stderr
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert result, output[-3000:]
    outcome = json.loads(result[-1].removeprefix("RESULT "))
    assert outcome["state"] == "failed", output[-3000:]
    assert "invalid T9k Job manifest" in output  # it failed for the reason set up here
    assert "XCom not found" not in output
    assert outcome["links"] in ([], [""], ['""'])  # no URL: there is no job to link to


@airflow3_only("the worker stores the extra link's URL again when a task ends")
def test_link_survives_a_failed_trigger(fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI) -> None:
    """Airflow fails a task whose trigger failed without calling the operator back; the link it stores then
    must still be the job's."""
    make(fake_hook, job_url_template=TEMPLATE).execute(context)
    stored = dict(ti.xcoms)

    class ResumedTI(FakeTI):
        def xcom_pull(self, *, task_ids: str, key: str) -> Any:
            assert task_ids == "train"
            return stored.get(key)

    resumed = make(FakeHook(), job_url_template=TEMPLATE)  # a new worker process: a fresh operator
    with pytest.raises(TaskDeferralError):
        resumed.resume_execution("__fail__", {"error": "Trigger failure"}, {"ti": ResumedTI()})
    assert T9kJobLink().get_link(resumed, ti_key=ti) == stored[T9kJobLink().xcom_key]


TB_TEMPLATE = "https://t9k.example/tensorboards/{namespace}/{name}"


def trained(**kwargs: Any) -> T9kJobOperator:
    """A PyTorchTrainingJob with a ``tensorboardSpec``, submitted without waiting (YAML text, as a rendered
    template file leaves the manifest)."""
    template = make_template(make_container("pytorch"))
    manifest = make_job("PyTorchTrainingJob", "", {
        "tensorboardSpec": {"trainingLogFilesets": ["t9k://pvc/logs/runs"]},
        "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}],
    })  # fmt: skip
    del manifest["metadata"]["name"]
    return T9kJobOperator(
        task_id="train", manifest=yaml.safe_dump(manifest), wait_for_completion=False, **kwargs
    )


def test_tensorboard_link_only_for_a_job_with_a_tensorboard(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "XCom", NoXCom if AIRFLOW_V_3_0_PLUS else StoredXCom)
    op = trained(tensorboard_url_template=TB_TEMPLATE)
    op.__dict__["hook"] = fake_hook
    assert op.tensorboard_url is None  # nothing submitted yet
    op.execute(context)
    url = f"https://t9k.example/tensorboards/conn-ns/{ti.xcoms['t9k_job']['name']}"
    assert op.tensorboard_url == url and ti.xcoms[T9kTensorBoardLink().xcom_key] == url
    assert T9kTensorBoardLink().get_link(op, ti_key=ti) == url

    plain = FakeTI()  # a GenericJob without a TensorBoard: no link, whatever the template
    job = make(FakeHook(), tensorboard_url_template=TB_TEMPLATE, job_url_template=TEMPLATE)
    job.execute({"ti": plain, "run_id": plain.run_id})
    assert job.tensorboard_url is None and T9kTensorBoardLink().xcom_key not in plain.xcoms
    assert T9kTensorBoardLink().get_link(job, ti_key=plain) == ""
    assert job.job_url  # the job's own link is there


@pytest.mark.parametrize(
    ("argument", "connection", "option", "chosen"),
    [
        ("https://arg/{name}", "https://conn/{name}", "https://conf/{name}", "https://arg/"),
        (None, "https://conn/{name}", "https://conf/{name}", "https://conn/"),
        (None, None, "https://conf/{name}", "https://conf/"),
        (None, None, None, None),
    ],
)
def test_a_template_comes_from_the_operator_then_the_connection_then_the_option(
    fake_hook: FakeHook,
    context: dict[str, Any],
    ti: FakeTI,
    monkeypatch: pytest.MonkeyPatch,
    argument: str | None,
    connection: str | None,
    option: str | None,
    chosen: str | None,
) -> None:
    for link in (T9kJobLink, T9kTensorBoardLink):
        if connection:
            fake_hook.link_templates[link.option] = connection
        if option:
            monkeypatch.setenv(f"AIRFLOW__T9K__{link.option.upper()}", option)
    op = trained(job_url_template=argument, tensorboard_url_template=argument)
    op.__dict__["hook"] = fake_hook
    op.execute(context)
    name = ti.xcoms["t9k_job"]["name"]
    expected = f"{chosen}{name}" if chosen else None
    assert (op.job_url, op.tensorboard_url) == (expected, expected)


@airflow3_only("the worker renders extra links on the operator that ran")
def test_a_resumed_operator_renders_the_tensorboard_link_from_its_manifest(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a deferral a fresh operator resumes with only the trigger's event: the link needs no XCom."""
    monkeypatch.setattr(link_module, "XCom", NoXCom)
    first = trained(tensorboard_url_template=TB_TEMPLATE)
    first.__dict__["hook"] = fake_hook
    first.execute(context)
    resumed = trained(tensorboard_url_template=TB_TEMPLATE)
    resumed.__dict__["hook"] = fake_hook
    stored = dict(ti.xcoms)

    class ResumedTI(FakeTI):
        def xcom_pull(self, *, task_ids: str, key: str) -> Any:
            return stored.get(key)

    with pytest.raises(TaskDeferralError):
        resumed.resume_execution("__fail__", {"error": "Trigger failure"}, {"ti": ResumedTI()})
    assert T9kTensorBoardLink().get_link(resumed, ti_key=ti) == stored[T9kTensorBoardLink().xcom_key]


def test_airflow_2_webserver_reads_the_persisted_tensorboard_url(
    fake_hook: FakeHook, context: dict[str, Any], ti: FakeTI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link_module, "RENDERED_IN_WORKER", False)
    monkeypatch.setattr(link_module, "XCom", StoredXCom)
    op = trained(tensorboard_url_template=TB_TEMPLATE)
    op.__dict__["hook"] = fake_hook
    op.execute(context)
    fresh = trained()  # the webserver's copy: never ran, no template
    assert T9kTensorBoardLink().get_link(fresh, ti_key=ti) == ti.xcoms[T9kTensorBoardLink().xcom_key]


@pytest.mark.parametrize(
    ("manifest", "declared"),
    [
        ({"spec": {"tensorboardSpec": {"trainingLogFilesets": ["t9k://pvc/a/b"]}}}, True),
        ("spec:\n  tensorboardSpec:\n    trainingLogFilesets: [t9k://pvc/a/b]\n", True),
        ({"spec": {"replicaSpecs": []}}, False),
        ({"spec": {"tensorboardSpec": None}}, False),
        ("spec: [unclosed", False),
        ("just text", False),
    ],
)
def test_declares_tensorboard(manifest: Any, declared: bool) -> None:
    assert link_module.declares_tensorboard(manifest) is declared
