"""The JobManager / TaskManager container of a local FlinkCluster pod: what the Flink image's entrypoint does.

``python -m t9k_provider.local.flink.entrypoint jobmanager|taskmanager`` writes the configuration
the operator passed (``FLINK_PROPERTIES``: the ConfigMap's ``config.yaml``, plus bind addresses from
``POD_IP``) to a private directory, asks Flink's own ``BashJavaUtils`` for the JVM memory options (as
Flink's ``jobmanager.sh``/``taskmanager.sh`` do), then runs the Flink process in the foreground, logging to
the console (the pod log), and forwards SIGTERM to it.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from t9k_provider.local.flink import dist

MAIN_CLASS = {
    "jobmanager": "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint",
    "taskmanager": "org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
}
RESOURCE_COMMAND = {"jobmanager": "GET_JM_RESOURCE_PARAMS", "taskmanager": "GET_TM_RESOURCE_PARAMS"}
RESULT_PREFIX = "BASH_JAVA_UTILS_EXEC_RESULT:"
# Where each process listens, unless the configuration says otherwise: the pod's own address.
BIND_KEYS = {
    "jobmanager": ("jobmanager.bind-host", "rest.bind-address"),
    "taskmanager": ("taskmanager.bind-host", "taskmanager.host"),
}
DEFAULT_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = ConsoleAppender
appender.console.name = ConsoleAppender
appender.console.type = CONSOLE
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
"""


class EntrypointError(Exception):
    pass


def _flat(text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise EntrypointError(f"FLINK_PROPERTIES is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise EntrypointError("FLINK_PROPERTIES must be a YAML mapping of Flink options")
    return data


def configuration(role: str, properties: str, pod_ip: str | None) -> str:
    """``config.yaml``: the operator's properties, then this pod's bind addresses where not set."""
    text = properties if properties.endswith("\n") or not properties else properties + "\n"
    written = _flat(text)
    if pod_ip:
        text += "".join(f"{key}: {pod_ip}\n" for key in BIND_KEYS[role] if key not in written)
    return text


def resource_params(java: str, home: Path, conf_dir: Path, role: str) -> tuple[list[str], list[str]]:
    """JVM options and ``-D`` memory settings as Flink's scripts compute them (``BashJavaUtils``)."""
    classpath = os.pathsep.join([str(home / "bin" / "bash-java-utils.jar"), str(home / "lib" / "*")])
    argv = [java, "-cp", classpath, "org.apache.flink.runtime.util.bash.BashJavaUtils"]
    argv += [RESOURCE_COMMAND[role], "--configDir", str(conf_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    lines = done.stdout.splitlines()
    results = [line[len(RESULT_PREFIX) :] for line in lines if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or len(results) < 2:
        cause = java_error(done.stdout + done.stderr)
        raise EntrypointError(f"Flink could not size the {role}'s memory from its configuration: {cause}")
    return results[-2].split(), results[-1].split()


def java_options(config: str, role: str) -> list[str]:
    """``env.java.opts.all`` and ``env.java.opts.<role>`` of the configuration."""
    data = _flat(config)
    options: list[str] = []
    for key in ("env.java.opts.all", f"env.java.opts.{role}"):
        if data.get(key):
            options += shlex.split(str(data[key]))
    return options


def java_error(output: str) -> str:
    """The root cause's message of a Java stack trace (its last ``Caused by:``), else the output's tail."""
    lines = output.strip().splitlines()
    causes = [line for line in lines if line.startswith(("Caused by: ", "Exception in thread "))]
    if causes:
        return causes[-1].split(": ", 2 if causes[-1].startswith("Caused by") else 1)[-1]
    return "\n".join(lines[-5:])


def command(role: str, java: str, home: Path, conf_dir: Path) -> list[str]:
    """The Flink process; what it writes (``java.io.tmpdir``: blobs, working dir) stays in ``conf_dir``."""
    jvm, dynamic = resource_params(java, home, conf_dir, role)
    jvm += java_options((conf_dir / "config.yaml").read_text(), role)
    log_config = f"-Dlog4j.configurationFile=file:{conf_dir / 'log4j-console.properties'}"
    jvm += [log_config, f"-Djava.io.tmpdir={conf_dir / 'tmp'}"]
    (conf_dir / "tmp").mkdir()
    classpath = str(home / "lib" / "*")
    main = [MAIN_CLASS[role], "--configDir", str(conf_dir), *dynamic]
    return [java, *jvm, "-cp", classpath, *main]


def run(role: str) -> int:
    if role not in MAIN_CLASS:
        raise EntrypointError(f"role must be one of {', '.join(MAIN_CLASS)} (got {role!r})")
    problem = dist.missing_prerequisites()
    java, home = dist.java(), dist.flink_home()
    if problem or java is None or home is None:
        raise EntrypointError(f"cannot start the Flink {role}: {problem}")
    with tempfile.TemporaryDirectory(prefix=f"flink-{role}-") as tmp:
        conf_dir = Path(tmp)
        properties = os.environ.get("FLINK_PROPERTIES", "")
        (conf_dir / "config.yaml").write_text(configuration(role, properties, os.environ.get("POD_IP")))
        log4j = os.environ.get("FLINK_LOG4J_CONSOLE") or DEFAULT_LOG4J
        (conf_dir / "log4j-console.properties").write_text(log4j)
        env = {**os.environ, "FLINK_HOME": str(home), "FLINK_CONF_DIR": str(conf_dir)}
        env.setdefault("FLINK_PLUGINS_DIR", str(home / "plugins"))
        env.setdefault("FLINK_LIB_DIR", str(home / "lib"))
        env.setdefault("FLINK_OPT_DIR", str(home / "opt"))
        argv = command(role, java, home, conf_dir)
        print(f"starting Flink {role}: {' '.join(argv)}", flush=True)
        child = subprocess.Popen(argv, env=env)

        def forward(signum: int, _frame: object) -> None:
            child.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, forward)
        code = child.wait()
        return 128 - code if code < 0 else code  # killed by a signal: the shell's 128 + signal number


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        return run(args[0] if args else "")
    except EntrypointError as exc:
        print(f"flink entrypoint: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
