"""APIServices (apiregistration.k8s.io/v1, cluster-scoped, status subresource).

An APIService says which server answers one group version: this one
(``spec.service`` unset, "Local") or an extension API server behind a
Service, reached over TLS verified with ``caBundle``.  Validation, the
status rules and the Table are upstream's (kube-aggregator's
``apis/apiregistration/validation`` and ``registry/apiservice``); the
``Available`` condition is written by the availability controllers
(``kapiserver/aggregator/availability.py``).
"""
from __future__ import annotations

import base64
import binascii
import datetime
from typing import Optional

from kapiserver.apis import columns
from kapiserver.machinery import errors, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.machinery.validation import PATH_SEGMENT
from kapiserver.registry.resource_type import ResourceType, Strategy

GROUP = "apiregistration.k8s.io"
VERSION = "v1"
PLURAL = "apiservices"
SCHEMA = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService"
AVAILABLE = "Available"
CONDITION_STATUSES = ["True", "False", "Unknown"]
LOCAL_REASON = "Local"
LOCAL_MESSAGE = "Local APIServices are always available"
DEFAULT_SERVICE_PORT = 443


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_local(apiservice: dict) -> bool:
    return not (apiservice.get("spec") or {}).get("service")


def group_version(apiservice: dict) -> tuple[str, str]:
    spec = apiservice.get("spec") or {}
    return spec.get("group") or "", spec.get("version") or ""


def name_for(group: str, version: str) -> str:
    """Upstream's required name: ``<version>.<group>`` (``v1.`` for the core group)."""
    return f"{version}.{group}"


def available_condition(apiservice: dict) -> Optional[dict]:
    for condition in (apiservice.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == AVAILABLE:
            return condition
    return None


def is_available(apiservice: dict) -> bool:
    condition = available_condition(apiservice)
    return condition is not None and condition.get("status") == "True"


def set_condition(apiservice: dict, status: str, reason: str, message: str) -> None:
    """Upstream's SetAPIServiceCondition: the transition time moves only when the status does."""
    conditions = apiservice.setdefault("status", {}).setdefault("conditions", [])
    if conditions is None:
        conditions = apiservice["status"]["conditions"] = []
    for condition in conditions:
        if condition.get("type") == AVAILABLE:
            if condition.get("status") != status:
                condition["status"] = status
                condition["lastTransitionTime"] = now_rfc3339()
            condition["reason"] = reason
            condition["message"] = message
            return
    conditions.append({"type": AVAILABLE, "status": status, "lastTransitionTime": now_rfc3339(),
                       "reason": reason, "message": message})


def _ca_bundle_bytes(value: object) -> int:
    if not isinstance(value, str) or not value:
        return 0
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        return len(value)


class APIServiceStrategy(Strategy):
    name_validation = PATH_SEGMENT
    # upstream's apiServerStatusStrategy keeps spec, labels, annotations, finalizers and ownerReferences
    status_fixed_metadata = ("labels", "annotations", "finalizers", "ownerReferences")

    def default(self, rtype: ResourceType, obj: dict) -> None:
        service = (obj.get("spec") or {}).get("service")
        if isinstance(service, dict) and service.get("port") is None:
            service["port"] = DEFAULT_SERVICE_PORT

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        obj.pop("status", None)
        obj["status"] = {}
        if is_local(obj):  # local APIServices are available from the start, as upstream marks them
            set_condition(obj, "True", LOCAL_REASON, LOCAL_MESSAGE)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateAPIService."""
        spec = as_dict(obj.get("spec"))
        group, version = str(spec.get("group") or ""), str(spec.get("version") or "")
        causes: list[errors.Cause] = []
        name = columns.get_path(obj, "metadata", "name", default="")
        required = name_for(group, version)
        if name and not validation.is_path_segment_name(name) and name != required:
            causes.append(errors.field_invalid("metadata.name", name,
                                               f'must be `spec.version+"."+spec.group`: "{required}"'))
        if not group and version != "v1":
            causes.append(errors.field_required("spec.group", "only v1 may have an empty group and it better be "
                                                              "legacy kube"))
        if group:
            causes.extend(errors.field_invalid("spec.group", group, p) for p in validation.is_dns1123_subdomain(group))
        causes.extend(errors.field_invalid("spec.version", version, p) for p in validation.is_dns1035_label(version))
        group_priority = spec.get("groupPriorityMinimum") or 0
        if not validation.is_int(group_priority) or group_priority <= 0 or group_priority > 20000:
            causes.append(errors.field_invalid("spec.groupPriorityMinimum", group_priority,
                                               "must be positive and less than 20000"))
        version_priority = spec.get("versionPriority") or 0
        if not validation.is_int(version_priority) or version_priority <= 0 or version_priority > 1000:
            causes.append(errors.field_invalid("spec.versionPriority", version_priority,
                                               "must be positive and less than 1000"))
        ca_bytes = _ca_bundle_bytes(spec.get("caBundle"))
        insecure = bool(spec.get("insecureSkipTLSVerify"))
        service = spec.get("service")
        if not service:
            if ca_bytes:
                causes.append(errors.field_invalid("spec.caBundle", f"{ca_bytes} bytes",
                                                   "local APIServices may not have a caBundle"))
            if insecure:
                causes.append(errors.field_invalid("spec.insecureSkipTLSVerify", insecure,
                                                   "local APIServices may not have insecureSkipTLSVerify"))
            return causes
        service = service if isinstance(service, dict) else {}
        if not service.get("namespace"):
            causes.append(errors.field_required("spec.service.namespace"))
        if not service.get("name"):
            causes.append(errors.field_required("spec.service.name"))
        port = service.get("port")
        problems = validation.is_valid_port_num(port)
        if problems:
            causes.append(errors.field_invalid("spec.service.port", port, "port is not valid: " + ", ".join(problems)))
        if insecure and ca_bytes:
            causes.append(errors.field_invalid("spec.insecureSkipTLSVerify", insecure,
                                               "may not be true if caBundle is present"))
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateAPIServiceStatusUpdate: each condition's status is True, False or Unknown."""
        causes = []
        conditions = (new.get("status") or {}).get("conditions") or []
        for i, condition in enumerate(conditions if isinstance(conditions, list) else ()):
            status = condition.get("status") if isinstance(condition, dict) else None
            if status not in CONDITION_STATUSES:
                causes.append(errors.field_not_supported(f"status.conditions[{i}].status", status or "",
                                                         CONDITION_STATUSES))
        return causes


def _service_cell(obj: dict) -> str:
    service = columns.get_path(obj, "spec", "service")
    if not service:
        return "Local"
    return f"{service.get('namespace', '')}/{service.get('name', '')}"


def _available_cell(obj: dict) -> str:
    condition = available_condition(obj)
    if condition is None:
        return "Unknown"
    status = condition.get("status") or ""
    if status == "True" or not condition.get("reason"):
        return status
    return f"{status} ({condition['reason']})"


def resource_type() -> ResourceType:
    return ResourceType(
        group=GROUP, version=VERSION, kind="APIService", plural=PLURAL, singular="apiservice",
        namespaced=False, strategy=APIServiceStrategy(), has_status=True, schema_name=SCHEMA,
        categories=("api-extensions",),
        table_columns=(
            columns.name_column(),
            columns.column("Service", _service_cell,
                           desc="The reference to the service that hosts this API endpoint."),
            columns.column("Available", _available_cell, desc="Whether this service is available."),
            columns.age_column(),
        ),
    )
