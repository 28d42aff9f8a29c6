"""The subresources that reach a kubelet or a backend: ``pods/log``, ``exec``,
``attach``, ``portforward``, ``proxy``, ``services/proxy``, ``nodes/proxy``.

Each computes where its stream goes, as upstream's ``LogLocation``,
``ExecLocation``, ``AttachLocation``, ``PortForwardLocation`` and the pod,
service and node ``ResourceLocation`` functions do (``pkg/registry/core/*``),
with their checks and messages: the container must be valid, the pod must
have a node (a log of a pod no node runs is empty, 204), a proxied pod must
have a routable IP.  The answer is a :class:`Location`; the endpoint layer
connects it (the kubelet's address, port and credentials, TLS, upgrades).
"""
from __future__ import annotations

import datetime
import random
from typing import Awaitable, Callable, Optional

from kapiserver.machinery import errors, strconv, validation
from kapiserver.registry.subresources import (Backend, Connected, ConnectResult, Location, ObjectStore, StreamMode,
                                              Subresource, SubresourceRequest)

PROXY_VERBS = ("create", "delete", "get", "patch", "update")


def _container_names(pod: dict) -> list[str]:
    from kapiserver.apis.core import podspec  # the pod validation loads with the first use
    return [c.get("name", "") for _, _, c in podspec.all_containers(pod.get("spec") or {})]


def _validate_container(pod: dict, container: str) -> str:
    """upstream's validateContainer: the container named, or the only one."""
    name = pod["metadata"]["name"]
    if not container:
        containers = (pod.get("spec") or {}).get("containers") or []
        if len(containers) == 1:
            return str(containers[0].get("name", ""))
        if not containers:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                 f"[{' '.join(_container_names(pod))}]")
    if container not in _container_names(pod):
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


# ------------------------------------------------------------------ query options, decoded as upstream's

def _bool_option(request: SubresourceRequest, name: str) -> bool:
    """runtime.Convert_Slice_string_To_bool: only "0" and "false" (any case) are false."""
    values = request.options.get(name)
    if not values:
        return False
    return not (values[0] == "0" or values[0].lower() == "false")


def _int_option(request: SubresourceRequest, name: str) -> Optional[int]:
    values = request.options.get(name)
    if not values:
        return None
    try:
        return strconv.parse_int(values[0])
    except ValueError as e:
        raise errors.bad_request(str(e)) from None


def _time_option(request: SubresourceRequest, name: str) -> Optional[str]:
    """metav1.Time.UnmarshalQueryParameter: RFC 3339, "" and "null" are unset; the value the
    kubelet gets is the time formatted again (upstream formats it in RFC 3339, seconds)."""
    values = request.options.get(name)
    if not values or values[0] in ("", "null"):
        return None
    raw = values[0]
    try:
        parsed = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
        if parsed.tzinfo is None or "T" not in raw.upper():
            raise ValueError
    except ValueError:
        # Go's time.Parse names the element it stopped at; this names the first, so the message is
        # upstream's only for a value that does not start with a year
        raise errors.bad_request(f'parsing time "{raw}" as "2006-01-02T15:04:05Z07:00": cannot parse '
                                 f'"{raw}" as "2006"') from None
    return parsed.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _reject_dry_run(request: SubresourceRequest) -> None:
    if request.options.get("dryRun"):
        raise errors.bad_request("dryRun is not supported")


# ------------------------------------------------------------------ pods/log

async def _pod_log(request: SubresourceRequest) -> ConnectResult:
    follow = _bool_option(request, "follow")
    previous = _bool_option(request, "previous")
    timestamps = _bool_option(request, "timestamps")
    since_seconds = _int_option(request, "sinceSeconds")
    since_time = _time_option(request, "sinceTime")
    tail_lines = _int_option(request, "tailLines")
    limit_bytes = _int_option(request, "limitBytes")
    if request.options.get("stream"):  # PodLogsQuerySplitStreams is off in 1.32
        raise errors.invalid("PodLogOptions", "", request.name,
                             [errors.field_forbidden("stream", "may not be specified")])
    causes = []
    if tail_lines is not None and tail_lines < 0:
        causes.append(errors.field_invalid("tailLines", tail_lines, "must be greater than or equal to 0"))
    if limit_bytes is not None and limit_bytes < 1:
        causes.append(errors.field_invalid("limitBytes", limit_bytes, "must be greater than 0"))
    if since_seconds is not None and since_time is not None:
        causes.append(errors.field_forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif since_seconds is not None and since_seconds < 1:
        causes.append(errors.field_invalid("sinceSeconds", since_seconds, "must be greater than 0"))
    if causes:
        raise errors.invalid("PodLogOptions", "", request.name, causes)
    pod = await request.store.get(request.namespace, request.name)
    container = _validate_container(pod, request.option("container"))
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:  # upstream: no node, no log yet; an empty answer
        return Connected(b"", "", 204)
    query: list[tuple[str, str]] = []
    for flag, value in (("follow", follow), ("previous", previous), ("timestamps", timestamps)):
        if value:
            query.append((flag, "true"))
    if since_seconds is not None:
        query.append(("sinceSeconds", str(since_seconds)))
    if since_time is not None:
        query.append(("sinceTime", since_time))
    if tail_lines is not None:
        query.append(("tailLines", str(tail_lines)))
    if limit_bytes is not None:
        query.append(("limitBytes", str(limit_bytes)))
    query.sort()  # url.Values.Encode sorts by key
    return Location(Backend.KUBELET, StreamMode.STREAM, f"/containerLogs/{request.namespace}/{request.name}/"
                    f"{container}", tuple(query), node=node, resource="pods/log", name=request.name)


# ------------------------------------------------------------------ exec, attach, portforward

# the kubelet's names of the stream options (api.ExecStdinParam...)
_KUBELET_STREAM_PARAMS = (("stdin", "input"), ("stdout", "output"), ("stderr", "error"), ("tty", "tty"))


def _stream_query(request: SubresourceRequest, with_command: bool) -> tuple[tuple[str, str], ...]:
    """upstream's streamParams: the streams asked for as the kubelet names them (``input=1``,
    ``output=1``, ``error=1``, ``tty=1``), then each command word; url.Values.Encode sorts the keys."""
    query = [(kubelet, "1") for option, kubelet in _KUBELET_STREAM_PARAMS if _bool_option(request, option)]
    if with_command:
        query.extend(("command", word) for word in request.options.get("command", []))
    query.sort(key=lambda item: item[0])  # values keep their order
    return tuple(query)


def _streaming(action: str) -> Callable[[SubresourceRequest], Awaitable[ConnectResult]]:
    async def connect(request: SubresourceRequest) -> ConnectResult:
        _reject_dry_run(request)
        pod = await request.store.get(request.namespace, request.name)
        container = _validate_container(pod, request.option("container"))
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise errors.bad_request(f"pod {request.name} does not have a host assigned")
        return Location(Backend.KUBELET, StreamMode.UPGRADE,
                        f"/{action}/{request.namespace}/{request.name}/{container}",
                        _stream_query(request, action == "exec"), node=node,
                        resource=f"pods/{action}", name=request.name)
    return connect


async def _port_forward(request: SubresourceRequest) -> ConnectResult:
    _reject_dry_run(request)
    ports: list[int] = []
    for value in request.options.get("ports", []):
        try:
            ports.append(strconv.parse_int(value, 32))
        except ValueError as e:
            raise errors.bad_request(str(e)) from None
    pod = await request.store.get(request.namespace, request.name)
    node = (pod.get("spec") or {}).get("nodeName")
    if not node:
        raise errors.bad_request(f"pod {request.name} does not have a host assigned")
    query = (("port", ",".join(str(p) for p in ports)),) if ports else ()
    return Location(Backend.KUBELET, StreamMode.UPGRADE, f"/portForward/{request.namespace}/{request.name}",
                    query, node=node, resource="pods/portforward", name=request.name)


# ------------------------------------------------------------------ proxies

def split_scheme_name_port(id_: str) -> Optional[tuple[str, str, str]]:
    """utilnet.SplitSchemeNamePort: ``name``, ``name:port`` or ``scheme:name:port``
    (scheme http or https); None when invalid."""
    parts = id_.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    if not name or scheme not in ("", "http", "https"):
        return None
    return scheme, name, port


def _proxy_path(request: SubresourceRequest) -> str:
    """The path after ``.../proxy``, with its leading slash (upstream's JoinPreservingTrailingSlash
    of the location's path and the subpath); "" when there is none (``.../proxy`` itself, which
    the proxy redirects to ``.../proxy/`` as upstream's proxyRedirectsforRootPath does)."""
    path = request.path or ""
    if path and not path.startswith("/"):
        path = "/" + path
    return path


def _host_port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise errors.bad_request(f'invalid port "{value}"') from None
    if not 0 < port < 65536:
        raise errors.bad_request(f'invalid port "{value}"')
    return port


async def _pod_proxy(request: SubresourceRequest) -> ConnectResult:
    parsed = split_scheme_name_port(request.name)
    if parsed is None:
        raise errors.bad_request(f'invalid pod request "{request.name}"')
    scheme, name, port = parsed
    pod = await request.store.get(request.namespace, name)
    if not port:
        for container in (pod.get("spec") or {}).get("containers") or []:
            ports = container.get("ports") or []
            if ports:
                port = str(ports[0].get("containerPort", ""))
                break
    ips = (pod.get("status") or {}).get("podIPs") or []
    pod_ip = str((ips[0] or {}).get("ip", "")) if ips else ""
    if not is_global_unicast(pod_ip):
        raise errors.bad_request("address not allowed")
    return Location(Backend.DIRECT, StreamMode.PROXY, _proxy_path(request), _query(request),
                    scheme=scheme or "http", host=pod_ip, port=_host_port(port) if port else 0,
                    resource="pods/proxy", name=name)


def is_global_unicast(ip: str) -> bool:
    """upstream's check of a pod IP: ParseIPSloppy, then IsGlobalUnicast."""
    address = validation.parse_ip_sloppy(ip)
    return address is not None and validation.is_global_unicast(address)


def _query(request: SubresourceRequest) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, values in request.options.items() for v in values)


async def _service_proxy(request: SubresourceRequest) -> ConnectResult:
    parsed = split_scheme_name_port(request.name)
    if parsed is None:
        raise errors.bad_request(f'invalid service request "{request.name}"')
    scheme, name, port_name = parsed
    host, port = await _service_endpoint(request, name, port_name)
    return Location(Backend.DIRECT, StreamMode.PROXY, _proxy_path(request), _query(request),
                    scheme=scheme or "http", host=host, port=port, resource="services/proxy", name=name)


async def _service_endpoint(request: SubresourceRequest, name: str, port_name: str) -> tuple[str, int]:
    """upstream's service REST ResourceLocation: a port number names the Service's port of that
    number; then an address of the Service's Endpoints serving that port (name), starting from a
    random subset and address, that is a pod's (a targetRef to a pod having that IP)."""
    try:
        port_number: Optional[int] = strconv.parse_int(port_name)
    except ValueError:
        port_number = None
    if port_number is not None:
        service = await request.store.get(request.namespace, name)
        for svc_port in (service.get("spec") or {}).get("ports") or []:
            if svc_port.get("port") == port_number:
                port_name = str(svc_port.get("name", ""))
                break
        else:
            raise errors.service_unavailable(f'no service port {port_number} found for service "{name}"')
    endpoints = await request.stores("", "v1", "endpoints").get(request.namespace, name)
    subsets = endpoints.get("subsets") or []
    if not subsets:
        raise errors.service_unavailable(f'no endpoints available for service "{name}"')
    pods = request.stores("", "v1", "pods")
    first = random.randrange(len(subsets))
    for i in range(len(subsets)):
        subset = subsets[(first + i) % len(subsets)]
        addresses = subset.get("addresses") or []
        if not addresses:
            continue
        for ep_port in subset.get("ports") or []:
            if str(ep_port.get("name", "")) != port_name:
                continue
            start = random.randrange(len(addresses))
            for j in range(len(addresses)):
                address = addresses[(start + j) % len(addresses)]
                if await _is_pod_address(pods, request.namespace, address):
                    return str(address.get("ip", "")), int(ep_port.get("port", 0))
    raise errors.service_unavailable(f'no endpoints available for service "{request.name}"')


async def _is_pod_address(pods: ObjectStore, namespace: str, address: dict) -> bool:
    """upstream's isValidAddress: only addresses that are a pod's are proxied to."""
    ref = address.get("targetRef") or {}
    if ref.get("kind") != "Pod":
        return False
    try:
        pod = await pods.get(str(ref.get("namespace") or namespace), str(ref.get("name", "")))
    except errors.StatusError:
        return False
    ips = [str(entry.get("ip", "")) for entry in (pod.get("status") or {}).get("podIPs") or []]
    return str(address.get("ip", "")) in ips


async def _node_proxy(request: SubresourceRequest) -> ConnectResult:
    parsed = split_scheme_name_port(request.name)
    if parsed is None:
        raise errors.bad_request(f'invalid node request "{request.name}"')
    scheme, name, port = parsed
    await request.store.get("", name)
    # the kubelet (its port, scheme and credentials) unless another port of the node is named;
    # that port is compared with the kubelet's when the node's connection is resolved
    return Location(Backend.KUBELET, StreamMode.PROXY, _proxy_path(request), _query(request), node=name,
                    scheme=scheme, port=_host_port(port) if port else 0, resource="nodes/proxy", name=name)


def pod_subresources() -> tuple[Subresource, ...]:
    return (
        Subresource("attach", ("create", "get"), kind="PodAttachOptions", connect=_streaming("attach"),
                    description="connect attach requests to Pod"),
        Subresource("exec", ("create", "get"), kind="PodExecOptions", connect=_streaming("exec"),
                    description="connect exec requests to Pod"),
        Subresource("log", ("get",), connect=_pod_log, description="read log of the specified Pod"),
        Subresource("portforward", ("create", "get"), kind="PodPortForwardOptions", connect=_port_forward,
                    description="connect portforward requests to Pod"),
        Subresource("proxy", PROXY_VERBS, kind="PodProxyOptions", connect=_pod_proxy, proxy=True,
                    description="connect requests to proxy of Pod"),
    )


def service_proxy() -> Subresource:
    return Subresource("proxy", PROXY_VERBS, kind="ServiceProxyOptions", connect=_service_proxy, proxy=True,
                       description="connect requests to proxy of Service")


def node_proxy() -> Subresource:
    return Subresource("proxy", PROXY_VERBS, kind="NodeProxyOptions", connect=_node_proxy, proxy=True,
                       description="connect requests to proxy of Node")
