"""Volume sources and claims as the core group validates them.

Pod volumes (``validate_volumes``), PersistentVolume sources
(``validate_persistent_volume_spec``) and claim specs
(``validate_claim_spec``: PVCs and generic ephemeral volumes) share these
checks.  Paths keep upstream's quirks (``persistentDisk`` for a GCE disk,
``cephfs`` for CephFS, ``downwarAPI`` for a second source after one), so a
message matches the one kube-apiserver sends.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any, Optional

from kapiserver.apis.core import resources, scheduling
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.jsonvalues import as_dict, as_list, as_str

FILE_MODE_MESSAGE = "must be a number between 0 and 0777 (octal), both inclusive"
PARTITION_MESSAGE = validation.inclusive_range_error(1, 255)
NOT_INLINE = "may not be specified in the context of inline volumes"
MORE_THAN_ONE = "may not specify more than 1 volume type"
ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
VOLUME_MODES = ["Block", "Filesystem"]
RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
HOST_PATH_TYPES = ["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate",
                   "Socket"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
VOLUME_DOWNWARD_FIELDS = ["metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
                          "metadata.uid"]
CONTAINER_RESOURCE_FIELDS = ["limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                             "requests.ephemeral-storage", "requests.memory"]
_IQN_RE = re.compile(r"iqn\.\d{4}-\d{2}\.([A-Za-z0-9\-.]+)(:[^,;*&$|\s]+)$")
_EUI_RE = re.compile(r"^eui.[A-Za-z0-9]{16}$")
_NAA_RE = re.compile(r"^naa.[A-Za-z0-9]{32}$")
_CPU_DIVISORS = {"1m", "1"}
_BYTE_DIVISORS = {"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}

# Sources of a pod volume, in the order upstream checks them (the first one
# found is validated, the others are "more than 1 volume type"); the value is
# the path upstream reports its own errors under.
POD_VOLUME_SOURCES = (
    ("emptyDir", "emptyDir"), ("hostPath", "hostPath"), ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "persistentDisk"), ("awsElasticBlockStore", "awsElasticBlockStore"), ("secret", "secret"),
    ("nfs", "nfs"), ("iscsi", "iscsi"), ("glusterfs", "glusterfs"), ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"), ("rbd", "rbd"), ("cinder", "cinder"), ("cephfs", "cephfs"),
    ("quobyte", "quobyte"), ("downwardAPI", "downwardAPI"), ("fc", "fc"), ("flexVolume", "flexVolume"),
    ("configMap", "configMap"), ("azureFile", "azureFile"), ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"), ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"), ("storageos", "storageos"), ("projected", "projected"), ("scaleIO", "scaleIO"),
    ("csi", "csi"), ("ephemeral", "ephemeral"), ("image", "image"),
)
# the name upstream uses in "may not specify more than 1 volume type" when a source comes second
_EXTRA_SOURCE_PATH = {"cephfs": "cephFS", "downwardAPI": "downwarAPI"}
PV_SOURCES = (
    ("hostPath", "hostPath"), ("gcePersistentDisk", "persistentDisk"), ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("glusterfs", "glusterfs"), ("flocker", "flocker"), ("nfs", "nfs"), ("rbd", "rbd"), ("quobyte", "quobyte"),
    ("cephfs", "cephfs"), ("iscsi", "iscsi"), ("cinder", "cinder"), ("fc", "fc"), ("flexVolume", "flexVolume"),
    ("azureFile", "azureFile"), ("vsphereVolume", "vsphereVolume"), ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"), ("azureDisk", "azureDisk"), ("scaleIO", "scaleIO"), ("local", "local"),
    ("storageos", "storageos"), ("csi", "csi"),
)





def _required(obj: dict, key: str, path: str) -> list[Cause]:
    return [] if obj.get(key) else [errors.field_required(f"{path}.{key}")]


# ------------------------------------------------------------------ paths

def validate_path_no_backsteps(target: str, path: str) -> list[Cause]:
    if ".." in target.split("/"):
        return [errors.field_invalid(path, target, "must not contain '..'")]
    return []


def validate_local_descending_path(target: str, path: str) -> list[Cause]:
    causes = []
    if target.startswith("/"):
        causes.append(errors.field_invalid(path, target, "must be a relative path"))
    return causes + validate_path_no_backsteps(target, path)


def validate_local_non_reserved_path(target: str, path: str) -> list[Cause]:
    causes = validate_local_descending_path(target, path)
    if target.startswith("..") and not target.startswith("../"):
        causes.append(errors.field_invalid(path, target, "must not start with '..'"))
    return causes


def _file_mode(mode: Any, path: str) -> list[Cause]:
    if mode is not None and validation.is_int(mode) and not 0 <= mode <= 0o777:
        return [errors.field_invalid(path, mode, FILE_MODE_MESSAGE)]
    return []


# ------------------------------------------------------------------ pod volume sources

def _key_to_path(item: Any, path: str) -> list[Cause]:
    item = as_dict(item)
    causes = _required(item, "key", path) + _required(item, "path", path)
    causes += validate_local_non_reserved_path(as_str(item.get("path")), f"{path}.path")
    return causes + _file_mode(item.get("mode"), f"{path}.mode")


def _secret_source(src: dict, path: str) -> list[Cause]:
    causes = _required(src, "secretName", path) + _file_mode(src.get("defaultMode"), f"{path}.defaultMode")
    for i, item in enumerate(as_list(src.get("items"))):
        causes += _key_to_path(item, f"{path}.items[{i}]")
    return causes


def _config_map_source(src: dict, path: str) -> list[Cause]:
    causes = _required(src, "name", path) + _file_mode(src.get("defaultMode"), f"{path}.defaultMode")
    for i, item in enumerate(as_list(src.get("items"))):
        causes += _key_to_path(item, f"{path}.items[{i}]")
    return causes


def _host_path(src: dict, path: str) -> list[Cause]:
    target = as_str(src.get("path"))
    if not target:
        return [errors.field_required(f"{path}.path")]
    causes = validate_path_no_backsteps(target, f"{path}.path")
    kind = src.get("type")
    if kind is not None and kind not in HOST_PATH_TYPES:
        causes.append(errors.field_not_supported(f"{path}.type", kind, HOST_PATH_TYPES))
    return causes


def _git_repo(src: dict, path: str) -> list[Cause]:
    return _required(src, "repository", path) + validate_local_descending_path(as_str(src.get("directory")),
                                                                              f"{path}.directory")


def _iqn_format_problems(value: str) -> list[str]:
    """The regex part of upstream's IQN / initiator checks (after the prefix test)."""
    if value.startswith("iqn") and not _IQN_RE.search(value):
        return ["must be valid format"]
    if value.startswith("eui") and not _EUI_RE.search(value):
        return ["must be valid format"]
    if value.startswith("naa") and not _NAA_RE.search(value):
        return ["must be valid format"]
    return []


def _iscsi(src: dict, path: str, persistent: bool = False, pv_name: str = "") -> list[Cause]:
    causes = _required(src, "targetPortal", path)
    if persistent and src.get("initiatorName") is not None and len(f"{pv_name}:{as_str(src.get('targetPortal'))}") > 64:
        causes.append(errors.field_invalid(f"{path}.targetportal", as_str(src.get("targetPortal")), _ISCSI_TOO_LONG))
    no_prefix = "must be valid format" if persistent else "must be valid format starting with iqn, eui, or naa"
    iqn = as_str(src.get("iqn"))
    if not iqn:
        causes.append(errors.field_required(f"{path}.iqn"))
    elif not iqn.startswith(("iqn", "eui", "naa")):
        causes.append(errors.field_invalid(f"{path}.iqn", iqn, no_prefix))
    else:
        causes.extend(errors.field_invalid(f"{path}.iqn", iqn, m) for m in _iqn_format_problems(iqn))
    lun = src.get("lun") or 0
    if validation.is_int(lun) and not 0 <= lun <= 255:
        causes.append(errors.field_invalid(f"{path}.lun", lun, validation.inclusive_range_error(0, 255)))
    if (src.get("chapAuthDiscovery") or src.get("chapAuthSession")) and src.get("secretRef") is None:
        causes.append(errors.field_required(f"{path}.secretRef"))
    if persistent and isinstance(src.get("secretRef"), dict) and not src["secretRef"].get("name"):
        causes.append(errors.field_required(f"{path}.secretRef.name"))
    initiator = src.get("initiatorName")
    if isinstance(initiator, str):
        if not initiator.startswith(("iqn", "eui", "naa")):
            causes.append(errors.field_invalid(f"{path}.initiatorname", initiator, no_prefix))
        causes.extend(errors.field_invalid(f"{path}.initiatorname", initiator, m)
                      for m in _iqn_format_problems(initiator))
    return causes


_ISCSI_TOO_LONG = ("Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if "
                   "iscsi.initiatorName is specified.")


def _fc(src: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    wwns, wwids = as_list(src.get("targetWWNs")), as_list(src.get("wwids"))
    if not wwns and not wwids:
        causes.append(errors.field_required(f"{path}.targetWWNs", "must specify either targetWWNs or wwids, but not "
                                                                  "both"))
    if wwns and wwids:
        causes.append(errors.field_invalid(f"{path}.targetWWNs", gorepr.string_slice(wwns),
                                           "targetWWNs and wwids can not be specified simultaneously"))
    if wwns:
        lun = src.get("lun")
        if lun is None:
            causes.append(errors.field_required(f"{path}.lun", "lun is required if targetWWNs is specified"))
        elif validation.is_int(lun) and not 0 <= lun <= 255:
            causes.append(errors.field_invalid(f"{path}.lun", lun, validation.inclusive_range_error(0, 255)))
    return causes


def _partition_disk(src: dict, path: str, id_key: str) -> list[Cause]:
    causes = _required(src, id_key, path)
    partition = src.get("partition") or 0
    if validation.is_int(partition) and not 0 <= partition <= 255:
        causes.append(errors.field_invalid(f"{path}.partition", partition, PARTITION_MESSAGE))
    return causes


def _nfs(src: dict, path: str) -> list[Cause]:
    causes = _required(src, "server", path) + _required(src, "path", path)
    target = as_str(src.get("path"))
    if not target.startswith("/"):
        causes.append(errors.field_invalid(f"{path}.path", target, "must be an absolute path"))
    return causes


def _quobyte(src: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    registry = as_str(src.get("registry"))
    message = "must be a host:port pair or multiple pairs separated by commas"
    if not registry:
        causes.append(errors.field_required(f"{path}.registry", message))
    elif len(as_str(src.get("tenant"))) >= 65:
        causes.append(errors.field_required(f"{path}.tenant",
                                            "must be a UUID and may not exceed a length of 64 characters"))
    else:
        for pair in registry.split(","):
            if not _split_host_port(pair):
                causes.append(errors.field_invalid(f"{path}.registry", registry, message))
    return causes + _required(src, "volume", path)


def _split_host_port(text: str) -> bool:
    """Whether Go's net.SplitHostPort accepts the text."""
    if text.startswith("["):
        end = text.find("]")
        return end > 0 and text[end + 1:end + 2] == ":" and "]" not in text[end + 1:]
    host, sep, _ = text.rpartition(":")
    return bool(sep) and ":" not in host and "[" not in text and "]" not in text


def _glusterfs(src: dict, path: str, persistent: bool = False) -> list[Cause]:
    causes = _required(src, "endpoints", path) + _required(src, "path", path)
    if persistent and src.get("endpointsNamespace") is not None:
        ns = as_str(src.get("endpointsNamespace"))
        if not ns:
            causes.append(errors.field_invalid(f"{path}.endpointsNamespace", ns,
                                               "if the endpointnamespace is set, it must be a valid namespace name"))
        else:
            causes.extend(errors.field_invalid(f"{path}.endpointsNamespace", ns, m)
                          for m in validation.is_dns1123_label(ns))
    return causes


def _flocker(src: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    name, uuid = as_str(src.get("datasetName")), as_str(src.get("datasetUUID"))
    if not name and not uuid:
        causes.append(errors.field_required(path, "one of datasetName and datasetUUID is required"))
    if name and uuid:
        causes.append(errors.field_invalid(path, "resource", "datasetName and datasetUUID can not be specified "
                                                             "simultaneously"))
    if "/" in name:
        causes.append(errors.field_invalid(f"{path}.datasetName", name, "must not contain '/'"))
    return causes


# the field labels ConvertDownwardAPIFieldLabel accepts (spec.host is the old spec.nodeName)
_CONVERTIBLE_FIELD_LABELS = {
    "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
    "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName", "status.phase",
    "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}


def split_subscripted_path(field_path: str) -> tuple[str, str, bool]:
    """upstream's fieldpath.SplitMaybeSubscriptedPath: ``metadata.labels['k']`` → (metadata.labels, k, True)."""
    if not field_path.endswith("']"):
        return field_path, "", False
    base, sep, subscript = field_path[:-2].partition("['")
    if not sep or not base:
        return field_path, "", False
    return base, subscript, True


def validate_object_field_selector(fs: Any, supported: list[str], path: str) -> list[Cause]:
    """A downward API fieldRef (upstream's validateObjectFieldSelector)."""
    fs = as_dict(fs)
    api_version, field_path = as_str(fs.get("apiVersion")), as_str(fs.get("fieldPath"))
    if not api_version:
        return [errors.field_required(f"{path}.apiVersion")]
    if not field_path:
        return [errors.field_required(f"{path}.fieldPath")]
    problem = ""
    internal = field_path
    if api_version != "v1":
        problem = f"unsupported pod version: {api_version}"
    else:
        base, _, subscripted = split_subscripted_path(field_path)
        if subscripted and base not in ("metadata.annotations", "metadata.labels"):
            problem = f"field label does not support subscript: {field_path}"
        elif not subscripted:
            if field_path == "spec.host":
                internal = "spec.nodeName"
            elif field_path not in _CONVERTIBLE_FIELD_LABELS:
                problem = f"field label not supported: {field_path}"
    if problem:
        return [errors.field_invalid(f"{path}.fieldPath", field_path, f"error converting fieldPath: {problem}")]
    base, subscript, subscripted = split_subscripted_path(internal)
    if subscripted:
        if base == "metadata.annotations":
            subscript = subscript.lower()
        return [errors.field_invalid(path, subscript, m) for m in validation.is_qualified_name(subscript)]
    if internal not in supported:
        return [errors.field_not_supported(f"{path}.fieldPath", internal, supported)]
    return []


def validate_resource_field_selector(fs: Any, path: str, volume: bool) -> list[Cause]:
    """A downward API resourceFieldRef (upstream's validateContainerResourceFieldSelector)."""
    fs = as_dict(fs)
    causes: list[Cause] = []
    resource = as_str(fs.get("resource"))
    if volume and not fs.get("containerName"):
        causes.append(errors.field_required(f"{path}.containerName"))
    elif not resource:
        causes.append(errors.field_required(f"{path}.resource"))
    elif resource not in CONTAINER_RESOURCE_FIELDS and not resource.startswith(("limits.hugepages-",
                                                                                "requests.hugepages-")):
        causes.append(errors.field_not_supported(f"{path}.resource", resource, CONTAINER_RESOURCE_FIELDS))
    divisor = fs.get("divisor")
    if divisor is not None:
        q, problems = resources.quantity_or_cause(divisor, f"{path}.divisor")
        causes.extend(problems)
        if q is not None and not q.is_zero():
            text = q.canonical()
            if resource in ("limits.cpu", "requests.cpu") and text not in _CPU_DIVISORS:
                causes.append(errors.field_invalid(f"{path}.divisor", resource,
                                                   "only divisor's values 1m and 1 are supported with the cpu "
                                                   "resource"))
            elif resource in ("limits.memory", "requests.memory") and text not in _BYTE_DIVISORS:
                causes.append(errors.field_invalid(f"{path}.divisor", resource, _BYTE_DIVISOR_MESSAGE + "memory "
                                                                                 "resource"))
            elif resource in ("limits.ephemeral-storage", "requests.ephemeral-storage") and \
                    text not in _BYTE_DIVISORS:
                causes.append(errors.field_invalid(f"{path}.divisor", resource,
                                                   _BYTE_DIVISOR_MESSAGE + "local ephemeral storage resource"))
            if resource.startswith(("requests.hugepages-", "limits.hugepages-")) and text not in _BYTE_DIVISORS:
                causes.append(errors.field_invalid(f"{path}.divisor", resource,
                                                   _BYTE_DIVISOR_MESSAGE + "hugepages resource"))
    return causes


_BYTE_DIVISOR_MESSAGE = ("only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are "
                         "supported with the ")


def _downward_api_file(item: Any, path: str) -> list[Cause]:
    item = as_dict(item)
    target = as_str(item.get("path"))
    causes = [] if target else [errors.field_required(f"{path}.path")]
    causes += validate_local_non_reserved_path(target, f"{path}.path")
    if item.get("fieldRef") is not None:
        causes += validate_object_field_selector(item["fieldRef"], VOLUME_DOWNWARD_FIELDS, f"{path}.fieldRef")
        if item.get("resourceFieldRef") is not None:
            causes.append(errors.field_invalid(path, "resource",
                                               "fieldRef and resourceFieldRef can not be specified simultaneously"))
    elif item.get("resourceFieldRef") is not None:
        causes += validate_resource_field_selector(item["resourceFieldRef"], f"{path}.resourceFieldRef", True)
    else:
        causes.append(errors.field_required(path, "one of fieldRef and resourceFieldRef is required"))
    return causes + _file_mode(item.get("mode"), f"{path}.mode")


def _downward_api(src: dict, path: str) -> list[Cause]:
    causes = _file_mode(src.get("defaultMode"), f"{path}.defaultMode")
    for item in as_list(src.get("items")):
        causes += _downward_api_file(item, path)  # upstream reports items at the source's path
    return causes


def _projected(src: dict, path: str) -> list[Cause]:
    causes = _file_mode(src.get("defaultMode"), f"{path}.defaultMode")
    seen: set[str] = set()

    def claim_path(p: str, conflict_value: Any) -> None:
        if p in seen:
            causes.append(errors.field_invalid(path, conflict_value, "conflicting duplicate paths"))
        seen.add(p)

    for i, source in enumerate(as_list(src.get("sources"))):
        source = as_dict(source)
        at = f"{path}.sources[{i}]"
        count = 0
        for kind in ("secret", "configMap"):
            block = source.get(kind)
            if block is None:
                continue
            count += 1
            block = as_dict(block)
            causes.extend(_required(block, "name", f"{at}.{kind}"))
            for j, item in enumerate(as_list(block.get("items"))):
                causes.extend(_key_to_path(item, f"{at}.{kind}.items[{j}]"))
                item_path = as_str(as_dict(item).get("path"))
                if item_path:
                    claim_path(item_path, as_str(block.get("name")))
        if source.get("downwardAPI") is not None:
            count += 1
            for item in as_list(as_dict(source["downwardAPI"]).get("items")):
                causes.extend(_downward_api_file(item, f"{at}.downwardAPI"))
                item_path = as_str(as_dict(item).get("path"))
                if item_path:
                    claim_path(item_path, item_path)
        token = source.get("serviceAccountToken")
        if token is not None:
            count += 1
            token = as_dict(token)
            seconds = token.get("expirationSeconds") or 0
            if validation.is_int(seconds):
                if seconds < 600:
                    causes.append(errors.field_invalid(f"{at}.serviceAccountToken.expirationSeconds", seconds,
                                                       "may not specify a duration less than 10 minutes"))
                if seconds > 1 << 32:
                    causes.append(errors.field_invalid(f"{at}.serviceAccountToken.expirationSeconds", seconds,
                                                       "may not specify a duration larger than 2^32 seconds"))
            token_path = as_str(token.get("path"))
            if not token_path:
                causes.append(errors.field_required(f"{path}.path"))
            else:
                causes.extend(validate_local_non_reserved_path(token_path, f"{path}.path"))
        bundle = source.get("clusterTrustBundle")
        if bundle is not None:
            count += 1
            causes.extend(_cluster_trust_bundle(as_dict(bundle), f"{at}.clusterTrustBundle"))
            claim_path(as_str(as_dict(bundle).get("path")), as_str(as_dict(bundle).get("path")))
        if count > 1:
            causes.append(errors.field_forbidden(at, "may not specify more than 1 volume type per source"))
    return causes


def _cluster_trust_bundle(bundle: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    name, signer = bundle.get("name"), bundle.get("signerName")
    if name is not None and signer is not None:
        causes.append(errors.field_invalid(path, errors.OMIT, "only one of name and signerName may be used"))
    elif name is not None:
        if not name:
            causes.append(errors.field_required(f"{path}.name", "must be a valid object name"))
        if bundle.get("labelSelector") is not None:
            causes.append(errors.field_invalid(f"{path}.labelSelector", errors.OMIT,
                                               "labelSelector must be unset if name is specified"))
    elif signer is not None:
        if not signer:
            causes.append(errors.field_required(f"{path}.signerName", "must be a valid signer name"))
        causes.extend(validation.validate_label_selector(bundle.get("labelSelector"), f"{path}.labelSelector"))
    else:
        causes.append(errors.field_required(path, "either name or signerName must be specified"))
    target = as_str(bundle.get("path"))
    if not target:
        causes.append(errors.field_required(f"{path}.path"))
    return causes + validate_local_non_reserved_path(target, f"{path}.path")


def _rbd(src: dict, path: str) -> list[Cause]:
    return _required(src, "monitors", path) + _required(src, "image", path)


def _cinder(src: dict, path: str, persistent: bool = False) -> list[Cause]:
    causes = _required(src, "volumeID", path)
    ref = src.get("secretRef")
    if isinstance(ref, dict):
        if not ref.get("name"):
            causes.append(errors.field_required(f"{path}.secretRef.name"))
        if persistent and not ref.get("namespace"):
            causes.append(errors.field_required(f"{path}.secretRef.namespace"))
    return causes


def _flex(src: dict, path: str) -> list[Cause]:
    causes = _required(src, "driver", path)
    for key in as_dict(src.get("options")):
        namespace = key.split("/", 1)[0] if "/" in key else key
        normalized = "." + namespace.lower()
        if normalized.endswith((".kubernetes.io", ".k8s.io")):
            causes.append(errors.field_invalid(f"{path}.options[{key}]", key,
                                               "kubernetes.io and k8s.io namespaces are reserved"))
    return causes


def _azure_file(src: dict, path: str, persistent: bool = False) -> list[Cause]:
    causes = _required(src, "secretName", path) + _required(src, "shareName", path)
    if persistent and src.get("secretNamespace") is not None and not src.get("secretNamespace"):
        causes.append(errors.field_required(f"{path}.secretNamespace"))
    return causes


def _azure_disk(src: dict, path: str) -> list[Cause]:
    causes = _required(src, "diskName", path)
    uri = as_str(src.get("diskURI"))
    if not uri:
        causes.append(errors.field_required(f"{path}.diskURI"))
    caching, kind = src.get("cachingMode"), src.get("kind")
    if caching is not None and caching not in ("None", "ReadOnly", "ReadWrite"):
        causes.append(errors.field_not_supported(f"{path}.cachingMode", caching, ["None", "ReadOnly", "ReadWrite"]))
    if kind is not None and kind not in ("Dedicated", "Managed", "Shared"):
        causes.append(errors.field_not_supported(f"{path}.kind", kind, ["Dedicated", "Managed", "Shared"]))
    if kind == "Managed" and not uri.startswith("/subscriptions/"):
        causes.append(errors.field_not_supported(f"{path}.diskURI", uri, [
            "/subscriptions/{sub-id}/resourcegroups/{group-name}/providers/microsoft.compute/disks/{disk-id}"]))
    if kind is not None and kind != "Managed" and not uri.startswith("https://"):
        causes.append(errors.field_not_supported(f"{path}.diskURI", uri, [
            "https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd"]))
    return causes


def _storageos(src: dict, path: str, persistent: bool = False) -> list[Cause]:
    name = as_str(src.get("volumeName"))
    causes = ([errors.field_required(f"{path}.volumeName")] if not name else
              [errors.field_invalid(f"{path}.volumeName", name, m) for m in validation.is_dns1123_label(name)])
    ns = as_str(src.get("volumeNamespace"))
    if ns:
        causes.extend(errors.field_invalid(f"{path}.volumeNamespace", ns, m) for m in validation.is_dns1123_label(ns))
    ref = src.get("secretRef")
    if isinstance(ref, dict):
        if not ref.get("name"):
            causes.append(errors.field_required(f"{path}.secretRef.name"))
        if persistent and not ref.get("namespace"):
            causes.append(errors.field_required(f"{path}.secretRef.namespace"))
    return causes


def validate_csi_driver_name(driver: str, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not driver:
        causes.append(errors.field_required(path))
    if len(driver) > 63:
        causes.append(errors.field_too_long(path, 63))
    causes.extend(errors.field_invalid(path, driver, m) for m in validation.is_dns1123_subdomain(driver.lower()))
    return causes


def _csi(src: dict, path: str) -> list[Cause]:
    causes = validate_csi_driver_name(as_str(src.get("driver")), f"{path}.driver")
    ref = src.get("nodePublishSecretRef")
    if isinstance(ref, dict):
        name = as_str(ref.get("name"))
        if not name:
            causes.append(errors.field_required(f"{path}.nodePublishSecretRef.name"))
        else:
            causes.extend(errors.field_invalid(f"{path}.name", name, m) for m in validation.is_dns1123_subdomain(name))
    return causes


def _ephemeral(src: dict, path: str) -> list[Cause]:
    template = src.get("volumeClaimTemplate")
    if template is None:
        return [errors.field_required(f"{path}.volumeClaimTemplate")]
    return validate_claim_template(as_dict(template), f"{path}.volumeClaimTemplate")


def _image(src: dict, path: str, is_pod: bool) -> list[Cause]:
    causes = []
    if is_pod and not src.get("reference"):
        causes.append(errors.field_required(f"{path}.reference"))
    return causes + _pull_policy(src.get("pullPolicy"), f"{path}.pullPolicy")


def _pull_policy(policy: Any, path: str) -> list[Cause]:
    if policy in PULL_POLICIES:
        return []
    if not policy:
        return [errors.field_required(path)]
    return [errors.field_not_supported(path, policy, PULL_POLICIES)]


def _validate_pod_source(key: str, src: dict, path: str, is_pod: bool) -> list[Cause]:
    if key == "emptyDir":
        limit = src.get("sizeLimit")
        if limit is not None:
            q, problems = resources.quantity_or_cause(limit, f"{path}.sizeLimit")
            if problems:
                return problems
            if q is not None and q.sign() < 0:
                return [errors.field_forbidden(f"{path}.sizeLimit",
                                               "SizeLimit field must be a valid resource quantity")]
        return []
    checks = {
        "hostPath": _host_path, "gitRepo": _git_repo, "secret": _secret_source, "nfs": _nfs,
        "iscsi": _iscsi, "glusterfs": _glusterfs, "flocker": _flocker, "rbd": _rbd, "cinder": _cinder,
        "quobyte": _quobyte, "downwardAPI": _downward_api, "fc": _fc, "flexVolume": _flex,
        "configMap": _config_map_source, "azureFile": _azure_file, "azureDisk": _azure_disk,
        "storageos": _storageos, "projected": _projected, "csi": _csi, "ephemeral": _ephemeral,
    }
    if key == "gcePersistentDisk":
        return _partition_disk(src, path, "pdName")
    if key == "awsElasticBlockStore":
        return _partition_disk(src, path, "volumeID")
    if key == "persistentVolumeClaim":
        return _required(src, "claimName", path)
    if key == "cephfs":
        return _required(src, "monitors", path)
    if key in ("vsphereVolume",):
        return _required(src, "volumePath", path)
    if key == "photonPersistentDisk":
        return _required(src, "pdID", path)
    if key == "portworxVolume":
        return _required(src, "volumeID", path)
    if key == "scaleIO":
        return _required(src, "gateway", path) + _required(src, "system", path) + _required(src, "volumeName", path)
    if key == "image":
        return _image(src, path, is_pod)
    return checks[key](src, path)


def validate_volume_source(volume: dict, path: str, pod_name: str, is_pod: bool) -> list[Cause]:
    """Exactly one source, and that source valid (upstream's validateVolumeSource)."""
    causes: list[Cause] = []
    count = 0
    name = as_str(volume.get("name"))
    for key, report_as in POD_VOLUME_SOURCES:
        if volume.get(key) is None:
            continue
        if count:
            causes.append(errors.field_forbidden(f"{path}.{_EXTRA_SOURCE_PATH.get(key, key)}", MORE_THAN_ONE))
            continue
        count += 1
        causes.extend(_validate_pod_source(key, as_dict(volume[key]), f"{path}.{report_as}", is_pod))
        if key == "iscsi" and as_dict(volume[key]).get("initiatorName") is not None and \
                len(f"{name}:{as_str(as_dict(volume[key]).get('targetPortal'))}") > 64:
            causes.append(errors.field_invalid(f"{path}.name", name, _ISCSI_TOO_LONG))
        if key == "ephemeral" and pod_name and name:
            claim = f"{pod_name}-{name}"
            causes.extend(errors.field_invalid(f"{path}.name", name, f'PVC name "{claim}": {m}')
                          for m in validation.is_dns1123_subdomain(claim))
    if not count:
        causes.append(errors.field_required(path, "must specify a volume type"))
    return causes


def validate_volumes(volumes: Any, pod_name: str, path: str, is_pod: bool) -> tuple[dict[str, dict], list[Cause]]:
    """(valid volumes by name, causes): upstream's ValidateVolumes."""
    causes: list[Cause] = []
    by_name: dict[str, dict] = {}
    created_claims = {f"{pod_name}-{as_str(as_dict(v).get('name'))}" for v in as_list(volumes)
                      if pod_name and as_dict(v).get("ephemeral") is not None}
    for i, volume in enumerate(as_list(volumes)):
        volume = as_dict(volume)
        at = f"{path}[{i}]"
        name = as_str(volume.get("name"))
        found = validate_volume_source(volume, at, pod_name, is_pod)
        if not name:
            found.append(errors.field_required(f"{at}.name"))
        else:
            found.extend(errors.field_invalid(f"{at}.name", name, m) for m in validation.is_dns1123_label(name))
        if name in by_name:
            found.append(errors.field_duplicate(f"{at}.name", name))
        if not found:
            by_name[name] = volume
        causes.extend(found)
        claim = as_dict(volume.get("persistentVolumeClaim")).get("claimName")
        if volume.get("persistentVolumeClaim") is not None and claim in created_claims:
            causes.append(errors.field_invalid(f"{at}.persistentVolumeClaim.claimName", claim,
                                               "must not reference a PVC that gets created for an ephemeral volume"))
    return by_name, causes


# ------------------------------------------------------------------ claims

def validate_access_modes(modes: Any, path: str, required_detail: str = "") -> list[Cause]:
    modes = as_list(modes)
    causes: list[Cause] = []
    if not modes:
        causes.append(errors.field_required(path, required_detail))
    once_pod = other = False
    for mode in modes:
        if mode not in ACCESS_MODES:
            causes.append(errors.field_not_supported(path, mode, ACCESS_MODES))
        if mode == "ReadWriteOncePod":
            once_pod = True
        elif mode in ACCESS_MODES:
            other = True
    if once_pod and other:
        causes.append(errors.field_forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return causes


def _data_source(ref: dict, path: str, allow_invalid_group: bool, with_namespace: bool) -> list[Cause]:
    causes = _required(ref, "name", path) + _required(ref, "kind", path)
    group = as_str(ref.get("apiGroup"))
    if not group and ref.get("kind") != "PersistentVolumeClaim":
        causes.append(errors.field_invalid(path, as_str(ref.get("kind")),
                                           "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
    if group and not allow_invalid_group:
        causes.extend(errors.field_invalid(f"{path}.apiGroup", group, m)
                      for m in validation.is_dns1123_subdomain(group))
    namespace = as_str(ref.get("namespace"))
    if with_namespace and namespace:
        causes.extend(errors.field_invalid(f"{path}.namespace", namespace, m)
                      for m in validation.is_dns1123_label(namespace))
    return causes


def validate_claim_spec(spec: Any, path: str, allow_invalid_selector: bool = False,
                        allow_invalid_group: bool = False) -> list[Cause]:
    """upstream's ValidatePersistentVolumeClaimSpec (VolumeAttributesClass is off in 1.32)."""
    spec = as_dict(spec)
    causes: list[Cause] = []
    modes = as_list(spec.get("accessModes"))
    if not modes:
        causes.append(errors.field_required(f"{path}.accessModes", "at least 1 access mode is required"))
    if spec.get("selector") is not None:
        causes.extend(validation.validate_label_selector(spec["selector"], f"{path}.selector", allow_invalid_selector))
    causes.extend(c for c in validate_access_modes(modes, f"{path}.accessModes") if modes)
    storage = as_dict(as_dict(spec.get("resources")).get("requests")).get("storage")
    storage_path = f"{path}.resources[storage]"
    if storage is None:
        causes.append(errors.field_required(storage_path))
    else:
        q, problems = resources.quantity_or_cause(storage, storage_path)
        causes.extend(problems)
        if q is not None:
            positive = resources.validate_positive_quantity(q, storage_path)
            causes.extend(positive or resources.validate_resource_quantity_value("storage", q, storage_path))
    class_name = as_str(spec.get("storageClassName"))
    if class_name:
        causes.extend(errors.field_invalid(f"{path}.storageClassName", class_name, m)
                      for m in validation.is_dns1123_subdomain(class_name))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        causes.append(errors.field_not_supported(f"{path}.volumeMode", mode, VOLUME_MODES))
    source, source_ref = spec.get("dataSource"), spec.get("dataSourceRef")
    if isinstance(source, dict):
        causes.extend(_data_source(source, f"{path}.dataSource", allow_invalid_group, False))
    if isinstance(source_ref, dict):
        causes.extend(_data_source(source_ref, f"{path}.dataSourceRef", allow_invalid_group, True))
    # upstream passes the *field.Path of dataSource as the value: %#v of the struct it points to
    source_path = gorepr.GoRepr('field.Path{name:"dataSource", index:"", parent:(*field.Path)(0xc000000000)}')
    if isinstance(source_ref, dict) and as_str(source_ref.get("namespace")):
        if isinstance(source, dict):
            causes.append(errors.field_invalid(path, source_path,
                                               "may not be specified when dataSourceRef.namespace is specified"))
    elif isinstance(source, dict) and isinstance(source_ref, dict):
        same = all(source.get(k) == source_ref.get(k) for k in ("apiGroup", "kind", "name"))
        if not same:
            causes.append(errors.field_invalid(path, source_path, "must match dataSourceRef"))
    return causes


def validate_claim_template(template: dict, path: str) -> list[Cause]:
    """upstream's ValidatePersistentVolumeClaimTemplate: labels, annotations, nothing else in metadata."""
    md = as_dict(template.get("metadata"))
    causes = validation.validate_annotations(md.get("annotations"), f"{path}.metadata.annotations")
    causes += validation.validate_labels(md.get("labels"), f"{path}.metadata.labels")
    for key, value in md.items():
        if key not in ("labels", "annotations") and value not in (None, "", {}, [], 0):
            causes.append(errors.field_forbidden(f"{path}.metadata.{key}", "cannot be set"))
    return causes + validate_claim_spec(template.get("spec"), f"{path}.spec")


# ------------------------------------------------------------------ persistent volumes

def _local(src: dict, path: str) -> list[Cause]:
    target = as_str(src.get("path"))
    if not target:
        return [errors.field_required(f"{path}.path")]
    return validate_path_no_backsteps(target, f"{path}.path")


def _pv_secret_reference(ref: dict, path: str) -> list[Cause]:
    name, namespace = as_str(ref.get("name")), as_str(ref.get("namespace"))
    causes = ([errors.field_required(f"{path}.name")] if not name else
              [errors.field_invalid(f"{path}.name", name, m) for m in validation.is_dns1123_subdomain(name)])
    causes += ([errors.field_required(f"{path}.namespace")] if not namespace else
               [errors.field_invalid(f"{path}.namespace", namespace, m)
                for m in validation.is_dns1123_label(namespace)])
    return causes


def _pv_csi(src: dict, path: str) -> list[Cause]:
    causes = validate_csi_driver_name(as_str(src.get("driver")), f"{path}.driver")
    causes += _required(src, "volumeHandle", path)
    for key in ("controllerPublishSecretRef", "controllerExpandSecretRef", "nodePublishSecretRef",
                "nodeExpandSecretRef"):
        if isinstance(src.get(key), dict):
            causes += _pv_secret_reference(src[key], f"{path}.{key}")
    return causes


def _validate_pv_source(key: str, src: dict, path: str, pv_name: str) -> list[Cause]:
    if key == "iscsi":
        return _iscsi(src, path, persistent=True, pv_name=pv_name)
    if key == "glusterfs":
        return _glusterfs(src, path, persistent=True)
    if key == "cinder":
        return _cinder(src, path, persistent=True)
    if key == "azureFile":
        return _azure_file(src, path, persistent=True)
    if key == "storageos":
        return _storageos(src, path, persistent=True)
    if key == "csi":
        return _pv_csi(src, path)
    if key == "local":
        return _local(src, path)
    if key == "rbd":
        return _rbd(src, path)
    return _validate_pod_source(key, src, path, False)


def validate_persistent_volume_spec(spec: Any, pv_name: str, path: str, inline: bool = False) -> list[Cause]:
    """upstream's ValidatePersistentVolumeSpec: a PersistentVolume's, or (``inline``) the inline
    spec of a VolumeAttachment, which must be CSI and may not carry what only a PV object has."""
    spec = as_dict(spec)
    causes: list[Cause] = []
    if inline:
        if spec.get("claimRef") is not None:
            causes.append(errors.field_forbidden(f"{path}.claimRef", NOT_INLINE))
        if spec.get("capacity"):
            causes.append(errors.field_forbidden(f"{path}.capacity", NOT_INLINE))
        if spec.get("csi") is None:
            causes.append(errors.field_required(f"{path}.csi", "has to be specified in the context of inline volumes"))
    modes = as_list(spec.get("accessModes"))
    if not modes:
        causes.append(errors.field_required(f"{path}.accessModes"))
    causes.extend(c for c in validate_access_modes(modes, f"{path}.accessModes") if modes)
    capacity = spec.get("capacity")
    cap_path = f"{path}.capacity"
    if not inline:
        if not capacity:
            causes.append(errors.field_required(cap_path))
        if not isinstance(capacity, dict) or "storage" not in capacity or len(capacity) > 1:
            causes.append(errors.field_not_supported(cap_path, resources.go_resource_list(capacity), ["storage"]))
        for name, key_path, q, problems in resources.quantities(capacity, cap_path):
            causes.extend(problems)
            if q is not None:
                causes.extend(resources.validate_basic_resource(q, key_path))
                causes.extend(resources.validate_positive_quantity(q, key_path))
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy and inline and policy != "Retain":
        causes.append(errors.field_forbidden(f"{path}.persistentVolumeReclaimPolicy",
                                             "may only be Retain in the context of inline volumes"))
    elif policy and not inline and policy not in RECLAIM_POLICIES:
        causes.append(errors.field_not_supported(f"{path}.persistentVolumeReclaimPolicy", policy, RECLAIM_POLICIES))
    affinity = spec.get("nodeAffinity")
    has_affinity = isinstance(affinity, dict)
    if has_affinity and inline:
        causes.append(errors.field_forbidden(f"{path}.nodeAffinity", NOT_INLINE))
    elif has_affinity:
        required = affinity.get("required")
        if required is not None:
            causes.extend(scheduling.validate_node_selector(required, f"{path}.nodeAffinity.required"))
        else:
            causes.append(errors.field_required(f"{path}.nodeAffinity.required",
                                                "must specify required node constraints"))
    count = 0
    for key, report_as in PV_SOURCES:
        if spec.get(key) is None:
            continue
        if count and key != "flexVolume":
            causes.append(errors.field_forbidden(f"{path}.{_EXTRA_SOURCE_PATH.get(key, key)}", MORE_THAN_ONE))
            continue
        count += 1
        causes.extend(_validate_pv_source(key, as_dict(spec[key]), f"{path}.{report_as}", pv_name))
        if key == "local" and not has_affinity:
            causes.append(errors.field_required(f"{path}.nodeAffinity", "Local volume requires node affinity"))
    if not count:
        causes.append(errors.field_required(path, "must specify a volume type"))
    host_path = as_str(as_dict(spec.get("hostPath")).get("path"))
    if spec.get("hostPath") is not None and posixpath.normpath(host_path or ".") == "/" and policy == "Recycle":
        causes.append(errors.field_forbidden(f"{path}.persistentVolumeReclaimPolicy",
                                             "may not be 'recycle' for a hostPath mount of '/'"))
    class_name = as_str(spec.get("storageClassName"))
    if class_name and inline:
        causes.append(errors.field_forbidden(f"{path}.storageClassName", NOT_INLINE))
    elif class_name:
        causes.extend(errors.field_invalid(f"{path}.storageClassName", class_name, m)
                      for m in validation.is_dns1123_subdomain(class_name))
    mode = spec.get("volumeMode")
    if mode is not None and inline and mode != "Filesystem":
        causes.append(errors.field_forbidden(f"{path}.volumeMode", "may not specify volumeMode other than "
                                                                   "Filesystem in the context of inline volumes"))
    elif mode is not None and not inline and mode not in VOLUME_MODES:
        causes.append(errors.field_not_supported(f"{path}.volumeMode", mode, VOLUME_MODES))
    return causes


def volume_is_claim(volume: Optional[dict]) -> bool:
    """Whether a pod volume is backed by a claim (block devices need one)."""
    return isinstance(volume, dict) and (volume.get("persistentVolumeClaim") is not None
                                         or volume.get("ephemeral") is not None)
