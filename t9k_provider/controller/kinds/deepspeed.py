"""DeepSpeedJob: sshd workers; worker-0 also runs `deepspeed` over pdsh with /t9k/hostfile
(docs/controller.md#deepspeed)."""

from __future__ import annotations

import dataclasses
import re
import shlex
from typing import Any

from t9k_provider.controller.engine.plan import Plan, ReplicaGroup
from t9k_provider.jobs.deepspeed import DeepSpeedJob

from .common import container_named, elastic_replicas, mode_fields, pick_container, scheduler_plan
from .context import JobContext
from .ssh import (
    SSH_SERVICE_PORTS,
    hostfile_text,
    session_env_snapshot,
    session_sshd_options,
    ssh_companions,
    ssh_node,
    sshd_with_session_env,
    worker_hosts,
)
from .training import training_plan

SSHD = "/usr/sbin/sshd"
SSH_MOUNT = "/root/.ssh"
HOSTFILE = "/t9k/hostfile"
ENV_FILE = "/root/.deepspeed_env"
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Values DeepSpeed's launcher exports unchanged: it strips each line, wraps one with other characters than
#: `[\w@%+=:,./-]` in double quotes (where the remote shell expands `$`, `` ` `` and `\`) and pdsh replaces
#: `%` sequences in the command; no leading or trailing space, no newline, none of `"$`\%`.
DEEPSPEED_SAFE_VALUE = re.compile(r'(?:[^\s"$`\\%](?:[^\n\r"$`\\%]*[^\s"$`\\%])?)?')
#: runMode debug/resume entries of type `master` (03-deepspeedjob-api.md: "one of master or worker") are
#: worker 0's, the worker that runs the launcher; a `worker` entry is every other worker's, and worker 0's
#: too when no `master` entry is given.
MODE_ALIASES = {"master": ("worker", 0)}


def deepspeed_args(typed: DeepSpeedJob, master: str) -> list[str]:
    config = typed.spec.config
    assert config.run is not None  # validated by the model unless customCommand is set
    args = [f"--hostfile={HOSTFILE}"]
    if not any(a.split("=", 1)[0] == "--master_addr" for a in config.other_args):
        args.append(f"--master_addr={master}")
    if not config.local_rank:
        args.append("--no_local_rank")
    if config.autotune != "none":
        args.append(f"--autotuning={config.autotune}")
    if config.run.mode == "module":
        args.append("--module")
    elif config.run.mode == "exec":
        args.append("--no_python")
    # No --elastic_training (nor --min/max_elastic_nodes), elastic or not: DeepSpeed 0.19.8 has none of them
    # (its launcher exits with "unrecognized arguments"); a resize relaunches worker-0 on the current hostfile
    # instead (docs/controller.md#elastic-relaunch, #decisions-on-the-open-questions).
    return [*args, *config.other_args, *config.run.argv()]


def env_file(template: dict[str, Any], container: str) -> str:
    """`KEY=VALUE` lines of the job's own plain env values that DeepSpeed's launcher exports on every node
    unchanged (`DEEPSPEED_SAFE_VALUE`). Every value, `valueFrom` ones included, reaches each worker's ranks
    from that worker's own container through its SSH sessions (`sshd_with_session_env`); a value this file
    would mangle is left out of it, so it cannot override the exact one, and no Secret ever lands here."""
    lines = [
        f"{e['name']}={e['value']}"
        for e in (container_named(template, container) or {}).get("env") or []
        if isinstance(e.get("value"), str)
        and SHELL_NAME.fullmatch(str(e.get("name", "")))
        and DEEPSPEED_SAFE_VALUE.fullmatch(e["value"])
    ]
    return "".join(f"{line}\n" for line in lines)


def launcher_script(after_sshd: str, session_env: bool) -> str:
    """worker-0's `sh -c` script: start sshd (a daemon), then `after_sshd`; with `session_env`, snapshot the
    container's environment first and give sshd the session hook (`sshd_with_session_env`)."""
    if not session_env:
        return f"{SSHD} && {after_sshd}"
    sshd = shlex.join([SSHD, *session_sshd_options()])
    return f"{session_env_snapshot()} && {sshd} && {after_sshd}"


def compile_deepspeed(typed: DeepSpeedJob, ctx: JobContext) -> Plan:
    spec = typed.spec
    worker = spec.worker
    elastic = spec.elastic if spec.elastic is not None and spec.elastic.enabled else None
    count = worker.replicas if elastic is None else elastic_replicas(elastic, worker.replicas)
    hosts = worker_hosts(ctx, count)
    cname = pick_container(worker.template, ("worker",))
    slots = spec.config.slots_per_worker or 1
    # disableCustomEnv: the controller carries no env of the job to the ranks (an empty .deepspeed_env, and
    # sessions keep sshd's own environment).
    session_env = not spec.disable_custom_env
    if spec.config.custom_command is not None:
        launch = ["sh", "-c", launcher_script(spec.config.custom_command, session_env)]
    else:
        script = launcher_script('exec deepspeed "$@"', session_env)
        launch = ["sh", "-c", script, "deepspeed", *deepspeed_args(typed, hosts[0])]
    sshd = [SSHD, "-D", "-e"]
    other = sshd_with_session_env(sshd) if session_env else sshd

    def build(index: int) -> dict[str, Any]:
        return ssh_node(
            worker.template,
            cname,
            ctx,
            SSH_MOUNT,
            launch if index == 0 else other,
            env={"PYTHONUNBUFFERED": "1"},
            hostfile_paths={"hostfile": HOSTFILE, "deepspeed_env": ENV_FILE},
            peers=hosts[1:] if index == 0 else (),
            session_env=session_env,
        )

    group = ReplicaGroup(
        type="worker",
        replicas=count,
        template=build,
        restart_policy=worker.restart_policy,
        training_container=cname,
        service_ports=SSH_SERVICE_PORTS,
        debug_command=(SSHD, "-D"),
        # worker-0's deepspeed reads the hostfile once, at start: elastic resizes relaunch it.
        relaunch_on_resize=0 if elastic is not None else None,
    )
    hostfile = {
        "hostfile": hostfile_text(hosts, slots),
        "deepspeed_env": "" if spec.disable_custom_env else env_file(worker.template, cname),
    }
    plan = training_plan(
        (group,),
        "worker",
        spec.run_policy,
        spec.run_mode,
        spec.scheduler,
        companions=ssh_companions(ctx, SSH_MOUNT, hostfile),
    )
    plan = dataclasses.replace(plan, **mode_fields(spec.run_mode, ["worker"], MODE_ALIASES))
    # worker-0 is the launcher even when elastic; only the gang minimum follows elastic.minReplicas.
    if elastic is not None:
        plan = dataclasses.replace(
            plan, scheduler=scheduler_plan(spec.scheduler, elastic.min_replicas or count)
        )
    return plan
