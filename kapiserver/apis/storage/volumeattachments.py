"""VolumeAttachments (storage.k8s.io/v1, cluster-scoped): a request to attach a
volume to a node, made by a controller and fulfilled by a CSI attacher through
``/status``.  The spec is fixed after create; a status write changes only the
status (upstream resets the metadata too)."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict, as_str
from kapiserver.registry.resource_type import RESET_OBJECT_META_FOR_STATUS, ResourceType, Strategy

SCHEMA = "io.k8s.api.storage.v1.VolumeAttachment"
SPEC = "io.k8s.api.storage.v1.VolumeAttachmentSpec"
SOURCE = "io.k8s.api.storage.v1.VolumeAttachmentSource"
STATUS = "io.k8s.api.storage.v1.VolumeAttachmentStatus"
EXACTLY_ONE = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
MAX_METADATA_SIZE = 256 * 1024
MAX_ERROR_MESSAGE = 1024


def _validate_source(source: dict, path: str) -> list[errors.Cause]:
    from kapiserver.apis.core.volumes import validate_persistent_volume_spec  # loads with the first use
    inline, pv = source.get("inlineVolumeSpec"), source.get("persistentVolumeName")
    if inline is None and pv is None:
        return [errors.field_required(path, EXACTLY_ONE)]
    if inline is not None and pv is not None:
        return [errors.field_forbidden(path, EXACTLY_ONE)]
    if pv is not None:
        if not pv:
            return [errors.field_required(f"{path}.persistentVolumeName",
                                          "must specify non empty persistentVolumeName")]
        return []
    return validate_persistent_volume_spec(inline, "", f"{path}.inlineVolumeSpec", inline=True)


def _go_spec(spec: dict) -> gorepr.GoRepr:
    """A storage.VolumeAttachmentSpec as %#v prints it."""
    source = as_dict(spec.get("source"))
    return gorepr.struct("storage.VolumeAttachmentSpec", (
        ("Attacher", gorepr.quote(spec.get("attacher") or "")),
        ("Source", gorepr.struct("storage.VolumeAttachmentSource", (
            ("PersistentVolumeName", gorepr.pointer(source.get("persistentVolumeName"), "string")),
            ("InlineVolumeSpec", gorepr.pointer(source.get("inlineVolumeSpec"), "core.PersistentVolumeSpec"))))),
        ("NodeName", gorepr.quote(spec.get("nodeName") or ""))))


def _validate_status(status: dict) -> list[errors.Cause]:
    causes = []
    metadata = status.get("attachmentMetadata") or {}
    if isinstance(metadata, dict) and sum(len(k) + len(str(v)) for k, v in metadata.items()) > MAX_METADATA_SIZE:
        causes.append(errors.field_too_long("status.attachmentMetadata", MAX_METADATA_SIZE))
    for key in ("attachError", "detachError"):
        message = columns.get_path(status, key, "message", default="")
        if isinstance(message, str) and len(message) > MAX_ERROR_MESSAGE:
            causes.append(errors.field_too_long(f"status.{key}.message", MAX_METADATA_SIZE))
    return causes


class VolumeAttachmentStrategy(Strategy):
    allow_unconditional_update = False  # upstream's AllowUnconditionalUpdate: a PUT names the version it replaces

    status_fixed_metadata = RESET_OBJECT_META_FOR_STATUS

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateVolumeAttachment and the tighter ValidateVolumeAttachmentV1 of new objects."""
        from kapiserver.apis.core.volumes import validate_csi_driver_name
        spec = as_dict(obj.get("spec"))
        causes = _validate(obj)
        attacher = as_str(spec.get("attacher"))
        causes += validate_csi_driver_name(attacher, "spec.attacher")
        pv = (spec.get("source") or {}).get("persistentVolumeName") if isinstance(spec.get("source"), dict) else None
        if isinstance(pv, str):
            causes += [errors.field_invalid("spec.source.persistentVolumeName", pv, m)
                       for m in validation.name_is_dns_subdomain(pv)]
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateVolumeAttachmentUpdate: the spec is fixed."""
        causes = _validate(new)
        if new.get("spec") != old.get("spec"):
            spec = as_dict(new.get("spec"))
            causes.append(errors.field_invalid("spec", _go_spec(spec), validation.FIELD_IMMUTABLE))
        return causes


def _validate(obj: dict) -> list[errors.Cause]:
    """upstream's ValidateVolumeAttachment."""
    spec = as_dict(obj.get("spec"))
    attacher = as_str(spec.get("attacher"))
    causes = field_checks.kube_object_meta(obj)
    if not attacher:
        causes.append(errors.field_required("spec.attacher"))
    source = as_dict(spec.get("source"))
    causes += _validate_source(source, "spec.source")
    node = as_str(spec.get("nodeName"))
    causes += [errors.field_invalid("spec.nodeName", node, m) for m in validation.name_is_dns_subdomain(node)]
    status = obj.get("status")
    if isinstance(status, dict):
        causes += _validate_status(status)
    return causes


def resource_type() -> ResourceType:
    return ResourceType(
        group="storage.k8s.io", version="v1", kind="VolumeAttachment", plural="volumeattachments",
        singular="volumeattachment", namespaced=False, strategy=VolumeAttachmentStrategy(), has_status=True,
        schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.TableColumn("Attacher", "string", lambda o: columns.get_path(o, "spec", "attacher", default=""),
                                format="name", description=columns.description(SPEC, "attacher")),
            columns.column("PV", lambda o: columns.get_path(o, "spec", "source", "persistentVolumeName", default=""),
                           SOURCE, "persistentVolumeName"),
            columns.column("Node", lambda o: columns.get_path(o, "spec", "nodeName", default=""), SPEC, "nodeName"),
            columns.column("Attached", lambda o: bool(columns.get_path(o, "status", "attached")), STATUS, "attached",
                           type="boolean"),
            columns.age_column(),
        ),
    )
