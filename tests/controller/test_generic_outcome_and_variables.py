"""GenericJob where the seed (01-genericjob.md) is silent or its example incomplete: a job whose replicas all
finished without meeting any rule, the Running condition's words, and the 变量替换 example's TF_CONFIG
(docs/controller.md#success-and-failure, #genericjob-variable-substitution)."""

from __future__ import annotations

import json

import yaml

from t9k_provider.controller.engine import Create
from tests.controller.engine_sim import Sim, job
from tests.support.builders import make_container, make_template

# -- every replica finished, no rule met -------------------------------------------------------------


def rules_job(master_policy: str = "Never", worker_limit: int = 0, **spec: object) -> dict:
    """The master decides success; both workers failing decides failure: a failed master, or one failed
    worker and one that succeeded, meets no rule."""
    return job(
        "GenericJob",
        {
            "replicaSpecs": [
                {
                    "type": "master",
                    "replicas": 1,
                    "restartPolicy": {"policy": master_policy, "limit": 0},
                    "template": make_template(),
                },
                {
                    "type": "worker",
                    "replicas": 2,
                    "restartPolicy": {"policy": "OnFailure", "limit": worker_limit},
                    "template": make_template(),
                },
            ],
            "successRules": [{"master": [0]}],
            "failureRules": [{"worker": [0, 1]}],
            **spec,
        },
    )


def started(manifest: dict) -> Sim:
    sim = Sim(manifest)
    sim.step()
    sim.run_all()
    sim.step()
    return sim


NO_RULE = (
    "Every replica has finished and no success or failure rule matched, so the job can no longer change. "
    'Succeeded: { "worker": [1] }; failed: { "master": [0], "worker": [0] }. '
    'Success rules: { "master": [0] }; failure rules: { "worker": [0, 1] }.'
)


def test_every_replica_finished_without_a_rule_met_fails_with_no_rule_matched():
    sim = started(rules_job())
    sim.finish("demo-master-0", exit_code=3)
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Running"  # worker-0 still runs: a rule can still be met
    sim.finish("demo-worker-0", exit_code=1)
    decision = sim.step()
    assert sim.status["phase"] == "Failed"
    failed = sim.cond("Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == ("True", "NoRuleMatched", NO_RULE)
    assert sim.cond("Completed") == {**sim.cond("Completed"), "status": "False", "reason": "Failed"}
    assert sim.cond("Running") == {**sim.cond("Running"), "status": "False", "reason": "Failed"}
    assert sim.cond("ReplicaFailure")["status"] == "True"
    assert decision.actions == [] and sim.status["completionTime"]
    assert (decision.events[-1].type, decision.events[-1].reason) == ("Warning", "Failed")
    assert decision.events[-1].message == NO_RULE
    sim.advance(10)
    sim.step()
    assert sim.status["phase"] == "Failed"  # sticky, and cleanup follows as for any end


def test_a_replica_that_will_be_restarted_has_not_finished_for_good():
    sim = started(rules_job(worker_limit=1))
    sim.finish("demo-master-0", exit_code=3)
    sim.finish("demo-worker-1")
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    # worker-0 has one restart left: it is being replaced, so the job goes on.
    assert sim.status["phase"] == "Running"
    assert sim.replica("demo-worker-0")["phase"] == "Creating"
    running = sim.cond("Running")["message"]
    assert running == "0 of 3 pods are running (1 being created, 1 succeeded, 1 failed)."
    sim.step()  # the replacement is created
    sim.run_all()
    sim.step()
    assert sim.status["phase"] == "Running"
    assert sim.cond("Running")["message"] == "1 of 3 pods are running (1 succeeded, 1 failed)."
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed" and sim.cond("Failed")["reason"] == "NoRuleMatched"


def test_a_rule_met_while_others_run_still_decides_and_no_condition_says_all_run():
    sim = started(rules_job())
    sim.finish("demo-worker-1")
    sim.finish("demo-master-0")
    sim.step()
    assert sim.status["phase"] == "Succeeded"
    assert sim.cond("Completed")["message"] == 'The job succeeded with rule: { "master": [0] }'
    # Nothing fails or restarts, but not every pod runs: the False condition does not say they all run.
    assert sim.cond("ReplicaFailure") == {
        **sim.cond("ReplicaFailure"),
        "status": "False",
        "message": "No replica is failing or restarting.",
    }


def test_pause_never_decides_and_a_replica_deleted_by_pause_is_not_finished():
    sim = started(rules_job())
    sim.finish("demo-master-0", exit_code=3)
    sim.finish("demo-worker-1")
    sim.step()
    sim.job["spec"]["runMode"] = {"pause": {"enabled": True}}
    sim.settle()
    assert sim.status["phase"] == "Paused"
    assert sim.replica("demo-worker-0")["phase"] == "Deleted"
    sim.job["spec"]["runMode"]["pause"]["enabled"] = False
    sim.step()  # worker-0 is recreated; the finished replicas are not re-run
    assert sim.status["phase"] == "Resuming" and sim.kinds("Pod") == ["demo-worker-0"]
    sim.run_all()
    sim.step()
    assert sim.status["phase"] == "Running"
    sim.finish("demo-worker-0", exit_code=1)
    sim.step()
    assert sim.status["phase"] == "Failed" and sim.cond("Failed")["reason"] == "NoRuleMatched"


def test_debug_mode_never_decides_and_the_running_message_follows_the_pods():
    sim = started(rules_job(runMode={"debug": {"enabled": True}}))
    assert sim.cond("Running")["message"] == "All pods are running normally."
    for name in ("demo-master-0", "demo-worker-0"):
        sim.finish(name, exit_code=1)
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Running"
    assert sim.cond("Running") == {
        **sim.cond("Running"),
        "status": "True",
        "message": "0 of 3 pods are running (1 succeeded, 2 failed).",
    }


def test_the_running_message_claims_all_pods_run_only_while_they_do():
    sim = started(rules_job())
    assert sim.cond("Running")["message"] == "All pods are running normally."
    assert sim.cond("ReplicaFailure")["message"] == "All pods are running normally."
    sim.finish("demo-worker-1")
    sim.step()
    assert sim.status["phase"] == "Running"
    assert sim.cond("Running")["message"] == "2 of 3 pods are running (1 succeeded)."
    assert sim.cond("ReplicaFailure") == {
        **sim.cond("ReplicaFailure"),
        "status": "False",
        "message": "No replica is failing or restarting.",
    }


# -- the seed's TF_CONFIG example (变量替换) -------------------------------------------------------

# seeds/01-genericjob.md, 变量替换: verbatim.
SEED_TF_CONFIG = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: generic-example
spec:
  replicaSpecs:
    - type: worker
      replicas: 4
      template:
        spec:
          containers:
            - command:
                - python
                - /mnt/training.py
              image: tensorflow/tensorflow:2.11.0
              name: tensorflow
              env:
                - name: TF_CONFIG
                  value: '{"task":{"type":"$(type)","index":$(rank)},"cluster":{"worker":["$(service.worker[0].host):$(service.port[http])","$(service.worker[1].host):$(service.port[http])","$(service.worker[2].host):$(service.port[http])","$(service.worker[3].host):$(service.port[http])"]}}'
"""  # noqa: E501

# seeds/01-genericjob.md, 暴露副本的服务: the `spec.service` of its example, verbatim.
SEED_SERVICE = """\
service:
  ports:
    - name: http
      port: 2222
"""


def seed_job(manifest: dict) -> dict:
    return job(manifest["kind"], manifest["spec"], name=manifest["metadata"]["name"])


def test_the_seeds_tf_config_example_as_written_is_rejected_saying_what_to_add():
    """The guide makes the service variables available only when spec.service exposes the replicas'
    services, and $(service.port[http]) is a number spec.service.ports alone holds; the example has no
    spec.service, so it cannot run as written: the message names the service section to add."""
    sim = Sim(seed_job(yaml.safe_load(SEED_TF_CONFIG)))
    decision = sim.step()
    assert sim.status["phase"] == "Failed"
    failed = sim.cond("Failed")
    assert failed["reason"] == "InvalidSpec"
    assert failed["message"] == (
        "Invalid spec: spec.replicaSpecs[0].template.spec.containers[0].env[0].value: "
        "$(service.worker[0].host), $(service.port[http]) and 3 more: a service variable needs "
        "spec.service.ports (a replica's host name and ports exist only when spec.service exposes them), "
        "and this job has no spec.service. "
        "Add to spec: `service: {ports: [{name: http, port: <the port the replicas listen on>}]}` "
        "(the guide's example: `service: {ports: [{name: http, port: 2222}]}`)"
    )
    assert decision.actions == [] and decision.requeue_after is None


def test_the_seeds_tf_config_example_with_the_service_it_needs_gives_each_pod_its_tf_config():
    manifest = yaml.safe_load(SEED_TF_CONFIG)
    manifest["spec"].update(yaml.safe_load(SEED_SERVICE))
    sim = Sim(seed_job(manifest))
    decision = sim.step()
    created = [(a.obj["kind"], a.obj["metadata"]["name"]) for a in decision.actions if isinstance(a, Create)]
    names = [f"generic-example-worker-{i}" for i in range(4)]
    assert created == [("Service", n) for n in names] + [("Pod", n) for n in names]
    for i, name in enumerate(names):
        svc = sim.objects[("Service", name)]["spec"]
        assert svc["clusterIP"] == "None" and [p["port"] for p in svc["ports"]] == [2222]
        env = sim.pod(name)["spec"]["containers"][0]["env"]
        assert [e["name"] for e in env] == ["TF_CONFIG"]
        assert json.loads(env[0]["value"]) == {
            "task": {"type": "worker", "index": i},
            "cluster": {"worker": [f"{n}:2222" for n in names]},
        }


def with_command(command: list[str], service: dict | None, replicas: int = 2) -> dict:
    spec: dict = {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": replicas,
                "template": make_template(make_container("main", command=command)),
            }
        ]
    }
    if service is not None:
        spec["service"] = service
    return job("GenericJob", spec)


def failed_message(manifest: dict) -> str:
    decision = Sim(manifest).decide()
    assert decision.status["phase"] == "Failed" and decision.actions == []
    failed = next(c for c in decision.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec"
    return failed["message"]


def test_a_service_without_ports_exposes_no_host_name():
    """No port, no Service (docs/controller.md, children table): the host name would not resolve."""
    message = failed_message(with_command(["ping", "$(service.worker[1].host)"], service={}))
    assert message == (
        "Invalid spec: spec.replicaSpecs[0].template.spec.containers[0].command[1]: "
        "$(service.worker[1].host): a service variable needs spec.service.ports (a replica's host name "
        "and ports exist only when spec.service exposes them), and spec.service has no ports. "
        "Add to spec.service: "
        "`ports: [{name: <name>, port: <the port the replicas listen on>}]` "
        "(the guide's example: `service: {ports: [{name: http, port: 2222}]}`)"
    )


def test_every_port_the_job_refers_to_is_named_in_one_message():
    manifest = job(
        "GenericJob",
        {
            "replicaSpecs": [
                {
                    "type": "master",
                    "template": make_template(make_container("main", command=["serve", "$(type)"])),
                },
                {
                    "type": "worker",
                    "template": make_template(
                        make_container(
                            "main",
                            command=["run"],
                            args=["$(service.master[0].host):$(service.port[grpc])"],
                            env=[{"name": "WEB", "value": "$(service.port[http])"}],
                        )
                    ),
                },
            ]
        },
    )
    message = failed_message(manifest)
    assert message.startswith(
        "Invalid spec: spec.replicaSpecs[1].template.spec.containers[0].args[0]: "
        "$(service.master[0].host), $(service.port[grpc]) and 1 more:"
    )
    assert (
        "Add to spec: `service: {ports: [{name: grpc, port: <the port the replicas listen on>}, "
        "{name: http, port: <the port the replicas listen on>}]}`"
    ) in message


def test_an_undeclared_port_says_what_to_add():
    message = failed_message(
        with_command(["$(service.port[http])"], service={"ports": [{"name": "grpc", "port": 1}]})
    )
    assert message == (
        "Invalid spec: spec.replicaSpecs[0].template.spec.containers[0].command[0]: $(service.port[http]) "
        "names unknown port 'http' (spec.service.ports has grpc): "
        "add `{name: http, port: <the port the replicas listen on>}` to spec.service.ports"
    )
