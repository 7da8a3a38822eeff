"""The console's HTML, rendered on the server from what `gather` read; every value from the cluster is
escaped (a log line or an event message is text, never markup), and only http(s) URLs become links."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from t9k_provider.jobs.contract import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE, TERMINAL_PHASES
from t9k_provider.local.console.gather import JobPage, Replica, TensorBoardLink

#: A page of a job still running reloads itself this often (seconds); a finished job's page does not.
REFRESH_SECONDS = 5
STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.5em; overflow-x: auto; margin: 0.3em 0 1em; }
.Warning { color: #a40; }
"""


def _document(title: str, body: str, refresh: bool = False) -> str:
    meta = f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">' if refresh else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{meta}'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, raw: Sequence[int] = ()) -> str:
    """Cells are escaped, except the columns in ``raw`` (markup this module built)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if i in raw else escape(str(c))}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>" if body else "<p>None.</p>"


def _link(url: str | None, text: str) -> str:
    if not url or not url.startswith(("http://", "https://")):
        return escape(text)
    return f'<a href="{escape(url, quote=True)}">{escape(text)}</a>'


def job_path(namespace: str, kind: str, name: str) -> str:
    return "/jobs/" + "/".join(quote(part, safe="") for part in (namespace, kind, name))


def index_page(jobs: list[dict[str, Any]]) -> str:
    rows = [
        (
            j["metadata"].get("namespace", ""),
            j["kind"],
            _link_path(job_path(j["metadata"].get("namespace", ""), j["kind"], j["metadata"]["name"]), j),
            (j.get("status") or {}).get("phase") or "",
            j["metadata"].get("creationTimestamp") or "",
        )
        for j in jobs
    ]
    body = "<h1>T9k Jobs</h1>" + _table(("Namespace", "Kind", "Name", "Phase", "Created"), rows, raw=(2,))
    return _document("T9k Jobs", body)


def _link_path(path: str, job: dict[str, Any]) -> str:
    return f'<a href="{escape(path, quote=True)}">{escape(job["metadata"]["name"])}</a>'


def not_found_page(what: str) -> str:
    body = f'<h1>Not found</h1><p>{escape(what)}</p><p><a href="/">All jobs</a></p>'
    return _document("Not found", body)


def tensorboard_page(namespace: str, tb: TensorBoardLink) -> str:
    """A TensorBoard that does not serve (yet): why, as its Ready condition says; the page reloads itself
    while the TensorBoard may still become Ready, and the console then redirects to it."""
    what = "cannot serve" if tb.failed else "is not ready yet"
    body = (
        f'<p><a href="/">All jobs</a></p><h1>TensorBoard {escape(namespace)}/{escape(tb.name)} {what}</h1>'
        f"<p>{escape(tb.message)}</p>"
    )
    return _document(f"TensorBoard {namespace}/{tb.name}", body, refresh=not tb.failed)


def _replica_name(pod: dict[str, Any]) -> str:
    labels = pod["metadata"].get("labels") or {}
    if LABEL_REPLICA_TYPE in labels:
        return f"{labels[LABEL_REPLICA_TYPE]}-{labels.get(LABEL_REPLICA_INDEX, '0')}"
    return pod["metadata"]["name"]


def _restarts(pod: dict[str, Any]) -> int:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return sum(int(cs.get("restartCount") or 0) for cs in statuses)


def _replicas(replicas: list[Replica]) -> str:
    rows = [
        (
            _replica_name(r.pod),
            r.pod["metadata"]["name"],
            (r.pod.get("status") or {}).get("phase") or "",
            (r.pod.get("spec") or {}).get("nodeName") or "",
            _restarts(r.pod),
        )
        for r in replicas
    ]
    return _table(("Replica", "Pod", "Phase", "Node", "Restarts"), rows)


def _logs(replicas: list[Replica]) -> str:
    parts = []
    for r in replicas:
        for container, lines in r.logs.items():
            title = f"{_replica_name(r.pod)} ({r.pod['metadata']['name']}, container {container})"
            parts.append(f"<h3>{escape(title)}</h3><pre>{escape(chr(10).join(lines))}</pre>")
    return "".join(parts) or "<p>None.</p>"


def _events(events: list[dict[str, Any]]) -> str:
    rows = []
    for e in events:
        involved = e.get("involvedObject") or {}
        when = e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or ""
        kind = e.get("type") or ""
        cells = (when, f'<span class="{escape(kind, quote=True)}">{escape(kind)}</span>', e.get("reason"))
        rows.append((*cells, f"{involved.get('kind')}/{involved.get('name')}", e.get("message") or ""))
    return _table(("Last seen", "Type", "Reason", "Object", "Message"), rows, raw=(1,))


def _tensorboard(tb: TensorBoardLink | None) -> str:
    if tb is None:
        return ""
    if tb.url:
        return f"<p>TensorBoard {escape(tb.name)}: {_link(tb.url, tb.url)}</p>"
    return f"<p>TensorBoard {escape(tb.name)}: not ready ({escape(tb.message)})</p>"


def job_page(page: JobPage) -> str:
    job = page.job
    meta, status = job["metadata"], job.get("status") or {}
    phase = status.get("phase") or "Unknown"
    title = f"{job['kind']} {meta.get('namespace', 'default')}/{meta['name']}"
    facts = (
        ("Kind", job["kind"]),
        ("Namespace", meta.get("namespace", "default")),
        ("Name", meta["name"]),
        ("Phase", phase),
        ("Created", meta.get("creationTimestamp") or ""),
    )
    conditions = [
        (
            c.get("type"),
            c.get("status"),
            c.get("reason") or "",
            c.get("message") or "",
            c.get("lastTransitionTime"),
        )
        for c in status.get("conditions") or []
    ]
    body = (
        f'<p><a href="/">All jobs</a></p><h1>{escape(title)}</h1>'
        + _table(("Field", "Value"), facts)
        + _tensorboard(page.tensorboard)
        + "<h2>Conditions</h2>"
        + _table(("Type", "Status", "Reason", "Message", "Last transition"), conditions)
        + "<h2>Replicas</h2>"
        + _replicas(page.replicas)
        + "<h2>Events</h2>"
        + _events(page.events)
        + "<h2>Last log lines</h2>"
        + _logs(page.replicas)
    )
    return _document(title, body, refresh=phase not in TERMINAL_PHASES)
