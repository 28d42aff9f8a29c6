"""An operator in plain ``kubernetes`` client code: a list-then-watch loop over labelled ConfigMaps.

Each ConfigMap labelled ``checksum.example.com/enabled=true`` gets a
ConfigMap ``<name>-checksum`` holding the SHA-256 of its data
(``data.sha256``), owned by it: when the source is deleted, the cluster's
garbage collector deletes the checksum. A change of the source's data
changes the checksum.

The loop is the usual one (an informer, by hand): list, reconcile
everything, then watch from the list's resourceVersion; when the watch ends
(its timeout) watch again from the last event's resourceVersion; when the
server answers 410 Gone (that version was compacted away) list again.

Run it: ``python checksum_operator.py [namespace]`` (``KUBECONFIG`` or
~/.kube/config); with no namespace it watches all of them.
"""
from __future__ import annotations

import hashlib
import json
import logging
import sys
import threading
from typing import Callable, Optional

from kubernetes import client, config, watch

LABEL = "checksum.example.com/enabled"
SUFFIX = "-checksum"
WATCH_SECONDS = 30  # how long one watch lasts: the loop looks at its stop event between events and watches

log = logging.getLogger("checksum-operator")


def checksum(data: Optional[dict]) -> str:
    return hashlib.sha256(json.dumps(data or {}, sort_keys=True).encode()).hexdigest()


class ChecksumOperator:
    def __init__(self, api_client: client.ApiClient, namespace: Optional[str] = None,
                 watch_seconds: int = WATCH_SECONDS) -> None:
        self.core = client.CoreV1Api(api_client)
        self.watch_seconds = watch_seconds
        self.namespace = namespace  # None: every namespace
        self.selector = f"{LABEL}=true"

    def _list_call(self) -> tuple[Callable[..., client.V1ConfigMapList], tuple[str, ...]]:
        # the client's own list function, not a wrapper: watch.Watch learns the objects' type from its docstring
        if self.namespace is None:
            return self.core.list_config_map_for_all_namespaces, ()
        return self.core.list_namespaced_config_map, (self.namespace,)

    def reconcile(self, source: client.V1ConfigMap) -> None:
        """Make ``<name>-checksum`` hold the checksum of ``source``'s data."""
        meta = source.metadata
        wanted = {"sha256": checksum(source.data)}
        derived = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=meta.name + SUFFIX, owner_references=[client.V1OwnerReference(
                api_version="v1", kind="ConfigMap", name=meta.name, uid=meta.uid, controller=True,
                block_owner_deletion=True)]),
            data=wanted)
        try:
            current = self.core.read_namespaced_config_map(meta.name + SUFFIX, meta.namespace)
        except client.ApiException as error:
            if error.status != 404:
                raise
            self.core.create_namespaced_config_map(meta.namespace, derived)
            log.info("created %s/%s%s", meta.namespace, meta.name, SUFFIX)
            return
        if current.data != wanted:
            derived.metadata.resource_version = current.metadata.resource_version
            self.core.replace_namespaced_config_map(meta.name + SUFFIX, meta.namespace, derived)
            log.info("updated %s/%s%s", meta.namespace, meta.name, SUFFIX)

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set."""
        resource_version: Optional[str] = None
        while not stop.is_set():
            list_function, args = self._list_call()
            if resource_version is None:
                listed = list_function(*args, label_selector=self.selector)
                for source in listed.items:
                    self.reconcile(source)
                resource_version = listed.metadata.resource_version
            stream = watch.Watch().stream(list_function, *args, label_selector=self.selector,
                                          resource_version=resource_version,
                                          timeout_seconds=self.watch_seconds, allow_watch_bookmarks=True)
            try:
                for event in stream:
                    # every event carries the version to watch from next (a BOOKMARK carries only that)
                    resource_version = event["raw_object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.reconcile(event["object"])
                    if stop.is_set():
                        break
            except client.ApiException as error:
                if error.status != 410:
                    raise
                log.info("watch expired (410 Gone): listing again")
                resource_version = None


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    config.load_kube_config()
    operator = ChecksumOperator(client.ApiClient(), sys.argv[1] if len(sys.argv) > 1 else None)
    try:
        operator.run(threading.Event())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
