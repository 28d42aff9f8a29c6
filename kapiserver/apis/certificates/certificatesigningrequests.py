"""CertificateSigningRequests (certificates.k8s.io/v1): ask the cluster to sign a key.

Upstream's registry, strategy and validation
(``pkg/registry/certificates/certificates``, ``pkg/apis/certificates/validation``):

* on create, ``spec.username``/``uid``/``groups``/``extra`` are the requester's,
  whatever the body said, and ``status`` is emptied (no pre-approved requests);
* ``spec`` is immutable; the main resource never changes ``status``;
* the ``approval`` subresource changes only ``status.conditions`` (Approved /
  Denied / Failed, never removed; Approved and Denied exclude each other);
* the ``status`` subresource changes ``status`` except the Approved and Denied
  conditions, and may set ``status.certificate`` once (PEM CERTIFICATE blocks);
* who may approve and sign is checked by the admission plugins of
  ``admission/certificates.py`` (``approve``/``sign`` on ``signers``), which
  this kind's store runs after the server's own plugins.

The signers themselves are controllers (``controllers/csr_signing.py``).
"""
from __future__ import annotations

import copy
from typing import Any, Optional

from kapiserver.apis import columns
from kapiserver.apis.certificates.pem import certificate_problem, check_base64, decoded, parse_csr
from kapiserver.machinery import errors, meta, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.validation import PATH_SEGMENT
from kapiserver.registry.context import Context
from kapiserver.registry.resource_type import ResourceType, Strategy
from kapiserver.registry.store import Store, WriteResult
from kapiserver.registry.subresources import Subresource

GROUP = "certificates.k8s.io"
SCHEMA = "io.k8s.api.certificates.v1.CertificateSigningRequest"
SPEC = "io.k8s.api.certificates.v1.CertificateSigningRequestSpec"
STATUS = "io.k8s.api.certificates.v1.CertificateSigningRequestStatus"

APPROVED = "Approved"
DENIED = "Denied"
FAILED = "Failed"
TRUE_ONLY_CONDITIONS = (APPROVED, DENIED, FAILED)
CONDITION_STATUSES = ("False", "True", "Unknown")
LEGACY_UNKNOWN_SIGNER = "kubernetes.io/legacy-unknown"
KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
MIN_EXPIRATION_SECONDS = 600
APPROVAL = "approval"

VALID_USAGES = (
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
    "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
    "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
)


# ---------------------------------------------------------------- helpers


def go_bytes(data: bytes) -> str:
    """A byte slice as Go's %#v prints it in upstream's field errors."""
    return "[]byte{" + ", ".join(f"0x{b:x}" for b in data) + "}"


def conditions(obj: dict) -> list[dict]:
    found = (obj.get("status") or {}).get("conditions") or []
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def has_condition(obj: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions(obj))


def _of_type(obj: dict, kind: str) -> list[dict]:
    return [c for c in conditions(obj) if c.get("type") == kind]


def _populate_timestamps(new: dict, old: dict) -> None:
    """Unset condition times become now; an unchanged status keeps its transition time (upstream)."""
    now = meta.now_rfc3339()
    for condition in conditions(new):
        if not condition.get("lastUpdateTime"):
            condition["lastUpdateTime"] = now
        if not condition.get("lastTransitionTime"):
            previous = next((c.get("lastTransitionTime") for c in conditions(old)
                             if c.get("type") == condition.get("type") and c.get("status") == condition.get("status")
                             and c.get("lastTransitionTime")), None)
            condition["lastTransitionTime"] = previous or now


# ---------------------------------------------------------------- validation


class _Options:
    """Upstream's certificateValidationOptions (what an update may do; what old data tolerates)."""

    def __init__(self, new: dict, old: Optional[dict]) -> None:
        self.setting_approval = False
        self.setting_certificate = False
        old_conditions = conditions(old) if old is not None else []
        old_types = [c.get("type") for c in old_conditions]
        old_usages = list(((old or {}).get("spec") or {}).get("usages") or [])
        self.both_approved_and_denied = APPROVED in old_types and DENIED in old_types
        self.legacy_signer = old is not None and (old.get("spec") or {}).get("signerName") == LEGACY_UNKNOWN_SIGNER
        self.duplicate_conditions = len(old_types) != len(set(old_types))
        self.empty_condition_type = "" in old_types or None in old_types
        old_cert = (old.get("status") or {}).get("certificate") if old is not None else None
        new_cert = (new.get("status") or {}).get("certificate")
        self.arbitrary_certificate = old is not None and (
            (old_cert or "") == (new_cert or "") or bool(certificate_problem(decoded(old_cert))))
        self.unknown_usages = any(u not in VALID_USAGES for u in old_usages)
        self.duplicate_usages = len(old_usages) != len(set(old_usages))


def _signer_name_problems(name: Any, path: str) -> list[errors.Cause]:
    if not name:
        return [errors.field_required(path)]
    segments = str(name).split("/")
    if len(segments) != 2:
        return [errors.field_invalid(path, name, "must be a fully qualified domain and path of the form "
                                                 "'example.com/signer-name'")]
    causes = []
    domain, rest = segments
    if len(domain) > 253:
        causes.append(errors.field_too_long(path, 253))
    labels = domain.split(".")
    for label in labels:
        problems = validation.is_dns1123_label(label)
        if problems:
            causes.extend(errors.field_invalid(path, domain, f'validating label "{label}": {p}') for p in problems)
            break
    if len(labels) < 2:
        causes.append(errors.field_invalid(path, domain, "should be a domain with at least two segments separated "
                                                         "by dots"))
    for label in rest.split("."):
        problems = validation.is_dns1123_subdomain(label)
        if problems:
            causes.extend(errors.field_invalid(path, rest, f'validating label "{label}": {p}') for p in problems)
            break
    if len(str(name)) > 253 + 253 + 63 + 1 + 1:
        causes.append(errors.field_too_long(path, 253 + 253 + 63 + 1 + 1))
    return causes


def validate_csr(obj: dict, opts: _Options) -> list[errors.Cause]:
    """Upstream's validateCertificateSigningRequest (metadata is checked by the Store)."""
    raw_spec = obj.get("spec")
    spec: dict = raw_spec if isinstance(raw_spec, dict) else {}
    causes: list[errors.Cause] = []
    request = decoded(spec.get("request"))
    problem = ""
    try:
        csr = parse_csr(request)
        if not csr.is_signature_valid:
            problem = "x509: signature verification failure"
    except ValueError as e:
        problem = str(e)
    if problem:
        causes.append(errors.Cause(errors.INVALID, f"Invalid value: {go_bytes(request)}: {problem}", "spec.request"))
    usages = spec.get("usages") or []
    if not isinstance(usages, list):
        usages = []
    if not usages:
        causes.append(errors.field_required("spec.usages"))
    if not opts.unknown_usages:
        for i, usage in enumerate(usages):
            if usage not in VALID_USAGES:
                causes.append(errors.field_not_supported(f"spec.usages[{i}]", usage, sorted(VALID_USAGES)))
    if not opts.duplicate_usages:
        seen: set = set()
        for i, usage in enumerate(usages):
            if usage in seen:
                causes.append(errors.field_duplicate(f"spec.usages[{i}]", usage))
            seen.add(usage)
    signer = spec.get("signerName")
    if not opts.legacy_signer and signer == LEGACY_UNKNOWN_SIGNER:
        causes.append(errors.field_invalid("spec.signerName", signer,
                                           "the legacy signerName is not allowed via this API version"))
    else:
        causes.extend(_signer_name_problems(signer, "spec.signerName"))
    expiration = spec.get("expirationSeconds")
    if isinstance(expiration, int) and not isinstance(expiration, bool) and expiration < MIN_EXPIRATION_SECONDS:
        causes.append(errors.field_invalid("spec.expirationSeconds", expiration,
                                           "may not specify a duration less than 600 seconds (10 minutes)"))
    causes.extend(_condition_problems(obj, opts))
    if not opts.arbitrary_certificate:
        problem = certificate_problem(decoded((obj.get("status") or {}).get("certificate")))
        if problem:
            causes.append(errors.field_invalid("status.certificate", "<certificate data>", problem))
    return causes


def _condition_problems(obj: dict, opts: _Options) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    seen: set = set()
    approved = denied = False
    for i, condition in enumerate(conditions(obj)):
        path = f"status.conditions[{i}]"
        kind = condition.get("type") or ""
        if not opts.empty_condition_type and not kind:
            causes.append(errors.field_required(f"{path}.type"))
        allowed = ("True",) if kind in TRUE_ONLY_CONDITIONS else CONDITION_STATUSES
        status = condition.get("status") or ""
        if not status:
            causes.append(errors.field_required(f"{path}.status"))
        elif status not in allowed:
            causes.append(errors.field_not_supported(f"{path}.status", status, list(allowed)))
        if not opts.both_approved_and_denied:
            if kind == APPROVED:
                approved = True
                if denied:
                    causes.append(errors.field_invalid(f"{path}.type", kind,
                                                       "Approved and Denied conditions are mutually exclusive"))
            elif kind == DENIED:
                denied = True
                if approved:
                    causes.append(errors.field_invalid(f"{path}.type", kind,
                                                       "Approved and Denied conditions are mutually exclusive"))
        if not opts.duplicate_conditions:
            if kind in seen:
                causes.append(errors.field_duplicate(f"{path}.type", kind))
            seen.add(kind)
    return causes


def validate_csr_update(new: dict, old: dict, opts: _Options) -> list[errors.Cause]:
    causes = validate_csr(new, opts)
    for kind in (APPROVED, DENIED, FAILED):
        if len(_of_type(new, kind)) < len(_of_type(old, kind)):
            causes.append(errors.field_forbidden("status.conditions",
                                                 f'updates may not remove a condition of type "{kind}"'))
    if not opts.setting_approval:
        for kind in (APPROVED, DENIED):
            before, after = _of_type(old, kind), _of_type(new, kind)
            if len(after) > len(before):
                causes.append(errors.field_forbidden("status.conditions",
                                                     f'updates may not add a condition of type "{kind}"'))
            elif len(after) == len(before) and after != before:
                causes.append(errors.field_forbidden("status.conditions",
                                                     f'updates may not modify a condition of type "{kind}"'))
    new_cert = (new.get("status") or {}).get("certificate") or ""
    old_cert = (old.get("status") or {}).get("certificate") or ""
    if new_cert != old_cert:
        if not opts.setting_certificate:
            causes.append(errors.field_forbidden("status.certificate", "updates may not set certificate content"))
        elif old_cert:
            causes.append(errors.field_forbidden("status.certificate",
                                                 "updates may not modify existing certificate content"))
    return causes


# ---------------------------------------------------------------- strategy


class CertificateSigningRequestStrategy(Strategy):
    name_validation = PATH_SEGMENT  # upstream checks no more than that the name fits in a URL path

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        check_base64(obj)
        obj["status"] = {}  # no pre-approved requests

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        check_base64(new)
        new["spec"] = copy.deepcopy(old.get("spec"))
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)

    def prepare_for_status_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        check_base64(new)
        raw_status = new.get("status")
        status: dict = raw_status if isinstance(raw_status, dict) else {}
        super().prepare_for_status_update(rtype, new, old)  # everything but status from the stored object
        new["status"] = status
        # the approval conditions are the approval subresource's: keep the stored instances
        for kind in (APPROVED, DENIED):
            before, positions = _of_type(old, kind), [i for i, c in enumerate(conditions(new))
                                                      if c.get("type") == kind]
            if len(before) == len(positions):
                for index, stored in zip(positions, before):
                    status["conditions"][index] = copy.deepcopy(stored)
        _populate_timestamps(new, old)

    def prepare_for_subresource_update(self, rtype: ResourceType, subresource: str, new: dict, old: dict) -> None:
        if subresource != APPROVAL:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        check_base64(new)
        _populate_timestamps(new, old)
        wanted = (new.get("status") or {}).get("conditions") if isinstance(new.get("status"), dict) else None
        new["spec"] = copy.deepcopy(old.get("spec"))
        status = copy.deepcopy(old.get("status") or {})
        if wanted:
            status["conditions"] = wanted
        else:
            status.pop("conditions", None)
        new["status"] = status

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return validate_csr(obj, _Options(obj, None))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return validate_csr_update(new, old, _Options(new, old))

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        opts = _Options(new, old)
        opts.setting_certificate = True
        return validate_csr_update(new, old, opts)

    def validate_subresource_update(self, rtype: ResourceType, subresource: str, new: dict,
                                    old: dict) -> list[errors.Cause]:
        opts = _Options(new, old)
        opts.setting_approval = subresource == APPROVAL
        return validate_csr_update(new, old, opts)


class CertificateSigningRequestStore(Store):
    """The generic Store, with the requester's identity written into the spec on create."""

    async def create_result(self, namespace: str, obj: Any, ctx: Optional[Context] = None) -> WriteResult:
        if isinstance(obj, dict) and isinstance(obj.get("spec"), dict):
            spec = obj["spec"]
            for key in ("username", "uid", "groups", "extra"):
                spec.pop(key, None)
            user = ctx.user if ctx is not None else None
            if user is not None:
                spec["username"] = user.name
                if user.uid:
                    spec["uid"] = user.uid
                if user.groups:
                    spec["groups"] = list(user.groups)
                if user.extra:
                    spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        return await super().create_result(namespace, obj, ctx)


def make_store(rtype: ResourceType, deps: Any) -> Store:
    return CertificateSigningRequestStore(rtype, deps.storage, deps.admission, deps.leases)


def condition_summary(obj: dict) -> str:
    """kubectl's CONDITION column: Denied / Approved / Pending, then ",Failed"."""
    types = {c.get("type") for c in conditions(obj)}
    status = DENIED if DENIED in types else APPROVED if APPROVED in types else "Pending"
    return status + (",Failed" if FAILED in types else "")


def _requested_duration(obj: dict) -> str:
    seconds = (obj.get("spec") or {}).get("expirationSeconds")
    return columns.human_duration(seconds) if isinstance(seconds, int) else "<none>"


def resource_type() -> ResourceType:
    return ResourceType(
        group=GROUP, version="v1", kind="CertificateSigningRequest", plural="certificatesigningrequests",
        singular="certificatesigningrequest", namespaced=False, short_names=("csr",),
        strategy=CertificateSigningRequestStrategy(), has_status=True,
        extra_subresources=(Subresource(APPROVAL, ("get", "patch", "update")),),
        schema_name=SCHEMA, make_store=make_store,
        selectable_fields={"spec.signerName": columns.text_at("spec", "signerName")},
        # pkg/apis/certificates/v1/conversion.go: no metadata.namespace
        field_labels=FieldLabelConversion(("metadata.name", "spec.signerName")),
        table_columns=(
            columns.name_column(),
            columns.age_column(),
            columns.column("SignerName", lambda o: (o.get("spec") or {}).get("signerName") or "<none>", SPEC,
                           "signerName"),
            columns.column("Requestor", lambda o: (o.get("spec") or {}).get("username") or "", SPEC, "request"),
            columns.column("RequestedDuration", _requested_duration, SPEC, "expirationSeconds"),
            columns.column("Condition", condition_summary, STATUS, "conditions"),
        ),
    )
