"""The webhook registration's strict form: the managed namespaces' selector.

Theory of operation: ``scripts/webhook-register --managed-from FILE`` (or
``--managed-from-configmap NS/NAME``) runs ``python -m kuota_webhook.registration``
on the Configuration the webhook is given (any of its three shapes). It prints the
``namespaceSelector`` of the unlabelled entry as one JSON line: the system
namespaces left out, and ``managedJobsNamespaceSelector`` (Kueue's default
when unset) — then the entry is ``failurePolicy: Fail``. When the
Configuration manages no namespace (``manageJobsWithoutQueueName`` off) it
prints ``none``: the entry keeps ``Ignore`` (docs/design/webhook-registration.md).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kuota.api.managed import default_selector
from kuota.api.parse import parse_object
from kuota.api.types import Configuration, LabelSelector
from kuota.kinds import NAMESPACE_NAME_LABEL, SYSTEM_NAMESPACES
from kuota.kube.translate import config_file_object, journal_object


def _system() -> dict[str, Any]:
    values = list(SYSTEM_NAMESPACES)
    return {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": values}


def namespace_selector(config: Configuration) -> dict[str, Any] | None:
    """The strict entry's namespaceSelector, or None when no namespace is managed."""
    if not config.manage_jobs_without_queue_name:
        return None
    selector: LabelSelector = config.managed_jobs_namespace_selector or default_selector(config)
    expressions = [_system()]
    for req in selector.match_expressions:
        expr: dict[str, Any] = {"key": req.key, "operator": req.operator}
        if req.operator in ("In", "NotIn"):
            expr["values"] = list(req.values)
        expressions.append(expr)
    out: dict[str, Any] = {"matchExpressions": expressions}
    if selector.match_labels:
        out["matchLabels"] = dict(selector.match_labels)
    return out


def read_configuration(text: str) -> Configuration | str:
    """The Configuration in ``text`` (a file's content, or a ConfigMap as JSON), or why not."""
    obj = config_file_object(text)
    if isinstance(obj, str):
        return obj
    parsed = parse_object(journal_object(str(obj["kind"]), obj))
    return parsed if isinstance(parsed, Configuration) else f"not a Configuration: {parsed}"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m kuota_webhook.registration FILE|-", file=sys.stderr)
        return 2
    if argv[0] == "-":
        text = sys.stdin.read()
    else:
        with open(argv[0], encoding="utf-8", errors="replace") as f:
            text = f.read()
    config = Configuration() if not text.strip() else read_configuration(text)
    if isinstance(config, str):
        print(f"kuota_webhook.registration: {argv[0]}: {config}", file=sys.stderr)
        return 1
    selector = namespace_selector(config)
    print("none" if selector is None else json.dumps(selector, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
