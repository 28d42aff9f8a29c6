"""ControllerRevisions (apps/v1): immutable snapshots of a controller's template; data is required."""
from __future__ import annotations

import json
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.apps.v1.ControllerRevision"


class ControllerRevisionStrategy(Strategy):
    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateControllerRevisionCreate."""
        causes = field_checks.kube_object_meta(obj) + field_checks.non_negative(obj, "", "revision")
        data = obj.get("data")
        if "data" not in obj or data is None:
            causes.append(errors.field_required("data", "data is mandatory"))
        elif not isinstance(data, dict):
            causes.append(errors.field_required("data", "data must be a valid JSON object"))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateControllerRevisionUpdate: data is fixed."""
        causes = field_checks.kube_object_meta(new) + field_checks.non_negative(new, "", "revision")
        return causes + field_checks.immutable(new.get("data"), old.get("data"), "data", _go_raw_extension)


def _go_raw_extension(data: Any) -> str:
    """A runtime.RawExtension as Go's %#v prints it (the bytes of the JSON)."""
    raw = json.dumps(data, separators=(",", ":")).encode()
    return "runtime.RawExtension{Raw:[]uint8{" + ", ".join(f"0x{b:x}" for b in raw) + "}, Object:runtime.Object(nil)}"


def _controller(obj: dict) -> str:
    """``daemonset.apps/name`` from the controller owner reference, as upstream prints it."""
    for ref in columns.get_path(obj, "metadata", "ownerReferences", default=[]) or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            api_version = ref.get("apiVersion") or ""
            group = api_version.split("/")[0] if "/" in api_version else ""
            kind = (ref.get("kind") or "").lower()
            qualified = f"{kind}.{group}" if group else kind
            return f"{qualified}/{ref.get('name', '')}" if qualified else ref.get("name", "")
    return "<none>"


def resource_type() -> ResourceType:
    return ResourceType(
        group="apps", version="v1", kind="ControllerRevision", plural="controllerrevisions",
        singular="controllerrevision", namespaced=True, strategy=ControllerRevisionStrategy(), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Controller", _controller, desc="Controller of the object"),
            columns.column("Revision", lambda o: o.get("revision", 0), SCHEMA, "revision", type="integer"),
            columns.age_column(),
        ),
    )
