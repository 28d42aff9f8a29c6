"""A kopf operator: each Widget gets a ConfigMap holding its greeting; sizes over 10 are refused at admission.

Run it against a cluster with ``kopf run -A widget_operator.py``: it logs in
with ``KUBECONFIG``. Its validating webhook is served by kopf's
``WebhookServer`` and registered by kopf itself (``settings.admission.managed``):
the serving certificate comes from ``WIDGET_WEBHOOK_CERT``/``_KEY``/``_CA``
when they are set (the tests set them), else kopf generates a self-signed one
(``pip install kopf[dev]`` for that).
"""
from __future__ import annotations

import os
from typing import Any

import kopf
import kubernetes

GROUP, VERSION, PLURAL = "example.com", "v1", "widgets"
MAX_SIZE = 10


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    # KUBECONFIG as it is when the operator starts (the kubernetes package reads it once, when imported)
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # the ConfigMaps are written with the official client
    kubernetes.config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    settings.admission.server = kopf.WebhookServer(
        addr=os.environ.get("WIDGET_WEBHOOK_ADDR", "127.0.0.1"), host=os.environ.get("WIDGET_WEBHOOK_HOST"),
        certfile=os.environ.get("WIDGET_WEBHOOK_CERT"), pkeyfile=os.environ.get("WIDGET_WEBHOOK_KEY"),
        cafile=os.environ.get("WIDGET_WEBHOOK_CA"))
    # kopf writes the ValidatingWebhookConfiguration "widgets.example.com" (URL, caBundle, rules) and removes it
    # when it stops
    settings.admission.managed = "widgets.example.com"


@kopf.on.validate(GROUP, VERSION, PLURAL, id="check-size")
def check_size(spec: kopf.Spec, **_: Any) -> None:
    size = spec.get("size", 1)
    if size > MAX_SIZE:
        raise kopf.AdmissionError(f"size {size} is over {MAX_SIZE}", code=422)


def configmap_name(widget: str) -> str:
    return f"{widget}-greeting"


@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def write_configmap(spec: kopf.Spec, name: str, namespace: str, body: kopf.Body, patch: kopf.Patch,
                    **_: Any) -> None:
    configmap: dict[str, Any] = {"metadata": {"name": configmap_name(name)},
                                 "data": {"greeting": spec["greeting"] * spec.get("size", 1)}}
    kopf.adopt(configmap, owner=body)  # owner reference: the garbage collector deletes it with the Widget
    core = kubernetes.client.CoreV1Api()
    try:
        core.create_namespaced_config_map(namespace, configmap)
    except kubernetes.client.ApiException as error:
        if error.status != 409:
            raise
        core.replace_namespaced_config_map(configmap_name(name), namespace, configmap)
    patch.status["configMap"] = configmap_name(name)
    patch.status["phase"] = "Ready"
