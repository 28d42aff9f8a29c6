"""PodTemplates (core/v1): a stored pod template, defaulted and validated like any other."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, labels
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.PodTemplate"


class PodTemplateStrategy(Strategy):
    tracks_generation = True

    def default(self, rtype: ResourceType, obj: dict) -> None:
        from kapiserver.apis.core import podspec  # the pod validation loads with the first use
        podspec.default_pod_template_spec(obj.get("template"))

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidatePodTemplate."""
        from kapiserver.apis.core import podspec
        return field_checks.kube_object_meta(obj) + podspec.validate_pod_template_spec(
            obj.get("template") or {}, "template", podspec.template_options(obj.get("template")))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        from kapiserver.apis.core import podspec
        return field_checks.kube_object_meta(new) + podspec.validate_pod_template_spec(
            new.get("template") or {}, "template", podspec.template_options(new.get("template"), old.get("template")))


def _containers(obj: dict, key: str) -> str:
    return ",".join(c.get(key, "") for c in columns.get_path(obj, "template", "spec", "containers", default=()))


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="PodTemplate", plural="podtemplates", singular="podtemplate",
        namespaced=True, strategy=PodTemplateStrategy(), schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.column("Containers", lambda o: _containers(o, "name"),
                           desc="Names of each container in the template."),
            columns.column("Images", lambda o: _containers(o, "image"),
                           desc="Images referenced by each container in the template."),
            columns.column("Pod Labels", lambda o: labels.selector_string(
                columns.get_path(o, "template", "metadata", "labels")) or "<none>",
                desc="The labels for the pod template."),
        ),
    )
