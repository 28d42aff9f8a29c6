"""The checksum operator's watch loop against the plugin's kapiserver (fixtures only, no conftest)."""
from __future__ import annotations

import threading
import traceback
from typing import Any, Iterator

import pytest
from kubernetes import client

from kapiserver.testing.eventually import eventually

from checksum_operator import LABEL, ChecksumOperator, checksum

TIMEOUT = 60.0  # the watch loop's stop: only against hangs


def source(name: str, data: dict, labelled: bool = True) -> dict:
    return {"metadata": {"name": name, "labels": {LABEL: "true"} if labelled else {}}, "data": data}


class Running:
    """The operator in a thread, watching one namespace; ``start()`` may come after objects exist."""

    def __init__(self, api_client: client.ApiClient, namespace: str) -> None:
        # one-second watches: the loop sees its stop event soon after the test
        self.operator = ChecksumOperator(api_client, namespace, watch_seconds=1)
        self.stop = threading.Event()
        self.errors: list[str] = []  # tracebacks
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.operator.run(self.stop)
        except BaseException as error:  # reported by the fixture: a crashed loop fails the test
            self.errors.append("".join(traceback.format_exception(error)))

    def start(self) -> None:
        self.thread.start()


@pytest.fixture
def operator(kube_client: client.ApiClient, kube_namespace: str) -> Iterator[Running]:
    running = Running(kube_client, kube_namespace)
    yield running
    running.stop.set()
    running.thread.join(TIMEOUT)
    assert not running.thread.is_alive(), "the watch loop did not stop"
    assert not running.errors, "\n".join(running.errors)


def derived_data(core: client.CoreV1Api, namespace: str, name: str) -> Any:
    try:
        return core.read_namespaced_config_map(name + "-checksum", namespace).data
    except client.ApiException as error:
        assert error.status == 404, error
        return None


def test_existing_and_new_configmaps_get_their_checksum(operator: Running, kube_client: client.ApiClient,
                                                        kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_client)
    core.create_namespaced_config_map(kube_namespace, source("before", {"a": "1"}))  # found by the first list
    operator.start()
    assert eventually(lambda: derived_data(core, kube_namespace, "before"), "before's checksum") == {
        "sha256": checksum({"a": "1"})}
    core.create_namespaced_config_map(kube_namespace, source("plain", {"b": "2"}, labelled=False))
    core.create_namespaced_config_map(kube_namespace, source("after", {"b": "2"}))  # seen by the watch
    assert eventually(lambda: derived_data(core, kube_namespace, "after"), "after's checksum") == {
        "sha256": checksum({"b": "2"})}
    # the unlabelled one was created first and the operator has handled a later event: it was left alone
    assert derived_data(core, kube_namespace, "plain") is None


def test_a_change_of_data_changes_the_checksum(operator: Running, kube_client: client.ApiClient,
                                               kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_client)
    operator.start()
    core.create_namespaced_config_map(kube_namespace, source("settings", {"color": "blue"}))
    eventually(lambda: derived_data(core, kube_namespace, "settings"), "the checksum")
    core.patch_namespaced_config_map("settings", kube_namespace, {"data": {"color": "red"}})
    eventually(lambda: derived_data(core, kube_namespace, "settings") == {"sha256": checksum({"color": "red"})},
               "the new checksum")


def test_the_checksum_goes_with_its_source(operator: Running, kube_client: client.ApiClient,
                                           kube_namespace: str) -> None:
    # the operator only sets the owner reference: the server's garbage collector does the deleting
    core = client.CoreV1Api(kube_client)
    operator.start()
    core.create_namespaced_config_map(kube_namespace, source("gone", {"k": "v"}))
    eventually(lambda: derived_data(core, kube_namespace, "gone"), "the checksum")
    core.delete_namespaced_config_map("gone", kube_namespace)
    eventually(lambda: derived_data(core, kube_namespace, "gone") is None, "the checksum's deletion")
