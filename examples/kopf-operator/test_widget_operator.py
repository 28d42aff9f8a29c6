"""The Widget operator under kopf's own test runner, against the plugin's kapiserver (no conftest)."""
from __future__ import annotations

import os
import pathlib
from typing import Any, Iterator

import kopf.testing
import pytest
from kubernetes import client

from kapiserver.testing.eventually import eventually
from kapiserver.testing.process import ServerProcess
from kapiserver.testing.webhook import WebhookCertificates

HERE = pathlib.Path(__file__).parent
TIMEOUT = 60.0  # kopf's runner: only against hangs


def widget(name: str, **spec: Any) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def operator(kube_apiserver: ServerProcess, kube_crds: Any, kube_client: client.ApiClient,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[kopf.testing.KopfRunner]:
    """The operator running (kopf in a thread of this process), its webhook in effect."""
    kube_crds(HERE / "crd.yaml")
    certs = WebhookCertificates.create(str(tmp_path_factory.mktemp("widget-webhook")), ["127.0.0.1"])
    environment = {"KUBECONFIG": kube_apiserver.kubeconfig, "WIDGET_WEBHOOK_CERT": certs.cert_path,
                   "WIDGET_WEBHOOK_KEY": certs.key_path, "WIDGET_WEBHOOK_CA": os.path.join(
                       os.path.dirname(certs.cert_path), "ca.crt")}
    saved = {key: os.environ.get(key) for key in environment}
    os.environ.update(environment)
    try:
        with kopf.testing.KopfRunner(["run", "-A", "--standalone", str(HERE / "widget_operator.py")],
                                     timeout=TIMEOUT) as runner:
            # kopf registers its webhook at startup: a dry-run of a refused Widget says when it is in effect
            objects = client.CustomObjectsApi(kube_client)

            def refused() -> bool:
                try:
                    objects.create_namespaced_custom_object("example.com", "v1", "default", "widgets",
                                                            widget("probe", greeting="hi", size=99), dry_run="All")
                except client.ApiException as error:
                    return error.status == 422
                return False
            eventually(refused, "kopf's webhook")
            yield runner
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output


def test_a_widget_gets_its_configmap_and_status(operator: kopf.testing.KopfRunner, kube_client: client.ApiClient,
                                                  kube_namespace: str) -> None:
    objects = client.CustomObjectsApi(kube_client)
    core = client.CoreV1Api(kube_client)
    objects.create_namespaced_custom_object("example.com", "v1", kube_namespace, "widgets",
                                            widget("w", greeting="hello ", size=2))

    def configmap() -> Any:
        try:
            return core.read_namespaced_config_map("w-greeting", kube_namespace)
        except client.ApiException as error:
            assert error.status == 404, error
            return None
    assert eventually(configmap, "the ConfigMap").data == {"greeting": "hello hello "}
    status = eventually(lambda: objects.get_namespaced_custom_object(
        "example.com", "v1", kube_namespace, "widgets", "w").get("status", {}).get("phase") and
        objects.get_namespaced_custom_object("example.com", "v1", kube_namespace, "widgets", "w")["status"],
        "the Widget's status")
    assert (status["phase"], status["configMap"]) == ("Ready", "w-greeting")

    # an update of the spec is reconciled too
    objects.patch_namespaced_custom_object("example.com", "v1", kube_namespace, "widgets", "w",
                                           {"spec": {"greeting": "bye "}})
    eventually(lambda: core.read_namespaced_config_map("w-greeting", kube_namespace).data["greeting"] == "bye bye ",
               "the updated ConfigMap")


def test_the_webhook_refuses_an_oversized_widget(operator: kopf.testing.KopfRunner, kube_client: client.ApiClient,
                                                 kube_namespace: str) -> None:
    objects = client.CustomObjectsApi(kube_client)
    with pytest.raises(client.ApiException) as refused:
        objects.create_namespaced_custom_object("example.com", "v1", kube_namespace, "widgets",
                                                widget("big", greeting="hi", size=11))
    assert refused.value.status == 422
    assert 'admission webhook \\"check-size.widgets.example.com\\" denied the request: size 11 is over 10' \
        in refused.value.body
    with pytest.raises(client.ApiException) as missing:
        objects.get_namespaced_custom_object("example.com", "v1", kube_namespace, "widgets", "big")
    assert missing.value.status == 404
