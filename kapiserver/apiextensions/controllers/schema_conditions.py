"""The NonStructuralSchema and KubernetesAPIApprovalPolicyConformant conditions of a CRD."""
from __future__ import annotations

from kapiserver.apiextensions.conditions import API_APPROVAL, NON_STRUCTURAL_SCHEMA, remove_condition, set_condition
from kapiserver.apiextensions.customresourcedefinitions import APPROVAL_ANNOTATION, APPROVAL_LINK, approval_state


def apply_nonstructural(crd: dict) -> None:
    """True with the violations when some version's schema is not structural; absent otherwise."""
    from kapiserver.apiextensions.schema.structural import violations  # (with the first CRD: see server.py)
    found: list[str] = []
    for i, version in enumerate((crd.get("spec") or {}).get("versions") or ()):
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            continue
        found.extend(violations(schema, f"spec.versions[{i}].schema.openAPIV3Schema"))
    if found:
        set_condition(crd, NON_STRUCTURAL_SCHEMA, "True", "Violations", ", ".join(found))
    else:
        remove_condition(crd, NON_STRUCTURAL_SCHEMA)


def apply_api_approval(crd: dict) -> None:
    """Protected groups (*.k8s.io, *.kubernetes.io) report whether the API review approval is recorded."""
    state, value = approval_state(crd)
    if state == "":
        remove_condition(crd, API_APPROVAL)
    elif state == "approved":
        set_condition(crd, API_APPROVAL, "True", "ApprovedAnnotation", f"approved in {value}")
    elif state == "bypassed":
        set_condition(crd, API_APPROVAL, "False", "UnapprovedAnnotation", f'not approved: "{value}"')
    elif state == "missing":
        set_condition(crd, API_APPROVAL, "False", "MissingAnnotation",
                      f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", see {APPROVAL_LINK}')
    else:
        set_condition(crd, API_APPROVAL, "False", "InvalidAnnotation",
                      f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}" with either a URL or '
                      f'a reason starting with "unapproved", see {APPROVAL_LINK}')
