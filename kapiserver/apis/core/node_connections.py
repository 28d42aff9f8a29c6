"""The subresources that reach a kubelet or a backend: ``pods/log``, ``exec``,
``attach``, ``portforward``, ``proxy``, ``services/proxy``, ``nodes/proxy``.

kube-apiserver answers them by connecting to the kubelet of the pod's node (or
proxying to a pod, service or node).  kapiserver runs no kubelets and reaches
none, so after upstream's own checks (the object exists, the container is
valid, the pod has a node) these answer 503 ServiceUnavailable saying so.
Where upstream needs no kubelet, kapiserver answers as upstream: the log of a
pod no node runs is empty (204), ``exec``/``attach`` of such a pod is 400
``pod ... does not have a host assigned``.  They are listed in discovery as
upstream lists them.
"""
from __future__ import annotations

from kapiserver.apis.core import podspec
from kapiserver.machinery import errors
from kapiserver.registry.subresources import Connected, Subresource, SubresourceRequest

PROXY_VERBS = ("create", "delete", "get", "patch", "update")
NO_KUBELET = "kapiserver runs no kubelets and does not connect to nodes"


def _no_kubelet(what: str, node: str) -> errors.StatusError:
    return errors.service_unavailable(f'{NO_KUBELET}: cannot {what} on node "{node}"')


def _container_names(pod: dict) -> list[str]:
    return [c.get("name", "") for _, _, c in podspec.all_containers(pod.get("spec") or {})]


def _validate_container(pod: dict, container: str) -> str:
    """upstream's validateContainer: the container named, or the only one."""
    name = pod["metadata"]["name"]
    if not container:
        containers = (pod.get("spec") or {}).get("containers") or []
        if len(containers) == 1:
            return containers[0].get("name", "")
        if not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                 f"[{' '.join(_container_names(pod))}]")
    if container not in _container_names(pod):
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


async def _pod_log(request: SubresourceRequest) -> Connected:
    pod = await request.store.get(request.namespace, request.name)
    container = _validate_container(pod, request.option("container"))
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:  # upstream: no node, no log yet; an empty answer
        return Connected(b"", "", 204)
    raise _no_kubelet(f'read the log of container "{container}" of pod "{request.name}"', node)


def _streaming(action: str, needs_container: bool):
    async def connect(request: SubresourceRequest) -> Connected:
        pod = await request.store.get(request.namespace, request.name)
        if needs_container:
            _validate_container(pod, request.option("container"))
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise errors.bad_request(f"pod {request.name} does not have a host assigned")
        raise _no_kubelet(f'{action} pod "{request.name}"', node)
    return connect


async def _pod_proxy(request: SubresourceRequest) -> Connected:
    pod = await request.store.get(request.namespace, request.name)
    raise errors.service_unavailable(f'{NO_KUBELET}: cannot proxy to pod "{request.name}" '
                                     f"(pod IP {(pod.get('status') or {}).get('podIP') or 'none'})")


def _proxy_target_name(name: str) -> str:
    """The object named by a proxy path segment ``[scheme:]name[:port]``."""
    parts = name.split(":")
    if len(parts) == 3 or (len(parts) == 2 and parts[0] in ("http", "https")):
        return parts[1]
    return parts[0]


async def _service_proxy(request: SubresourceRequest) -> Connected:
    name = _proxy_target_name(request.name)
    await request.store.get(request.namespace, name)
    raise errors.service_unavailable(f'{NO_KUBELET}: cannot proxy to service "{name}"')


async def _node_proxy(request: SubresourceRequest) -> Connected:
    name = _proxy_target_name(request.name)
    await request.store.get("", name)
    raise _no_kubelet("proxy to the kubelet", name)


def pod_subresources() -> tuple[Subresource, ...]:
    return (
        Subresource("attach", ("create", "get"), kind="PodAttachOptions", connect=_streaming("attach to", True),
                    description="connect attach requests to Pod"),
        Subresource("exec", ("create", "get"), kind="PodExecOptions", connect=_streaming("exec in", True),
                    description="connect exec requests to Pod"),
        Subresource("log", ("get",), connect=_pod_log, description="read log of the specified Pod"),
        Subresource("portforward", ("create", "get"), kind="PodPortForwardOptions",
                    connect=_streaming("forward ports of", False), description="connect portforward requests to Pod"),
        Subresource("proxy", PROXY_VERBS, kind="PodProxyOptions", connect=_pod_proxy,
                    description="connect requests to proxy of Pod"),
    )


def service_proxy() -> Subresource:
    return Subresource("proxy", PROXY_VERBS, kind="ServiceProxyOptions", connect=_service_proxy,
                       description="connect requests to proxy of Service")


def node_proxy() -> Subresource:
    return Subresource("proxy", PROXY_VERBS, kind="NodeProxyOptions", connect=_node_proxy,
                       description="connect requests to proxy of Node")
