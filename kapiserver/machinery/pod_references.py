"""What a Pod or a PersistentVolume refers to by name (upstream's pkg/api/v1/pod and
pkg/api/v1/persistentvolume visitors, the ephemeral-volume and resource-claim name helpers).

The Secrets and ConfigMaps a pod's containers and volumes use (VisitPodSecretNames,
VisitPodConfigmapNames), its PersistentVolumeClaims (ephemeral volumes' claims included) and
ResourceClaims, and the Secrets a PersistentVolume's source names (VisitPVSecretNames).  The
admission plugins that limit references and the Node authorizer's graph both read them, so they
sit at the ground layer.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from kapiserver.machinery.jsonvalues import as_dict, as_list


def ref_name(ref: Any) -> str:
    return str(as_dict(ref).get("name") or "")


def _containers(spec: dict) -> Iterator[dict]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in as_list(spec.get(key)):
            yield as_dict(c)


# volume sources that name a secret: (source, the key of the secret reference, whether
# the reference is an object {"name": ...} rather than a plain name)
_SECRET_VOLUME_SOURCES = (
    ("azureFile", "secretName", False),
    ("cephfs", "secretRef", True),
    ("cinder", "secretRef", True),
    ("flexVolume", "secretRef", True),
    ("rbd", "secretRef", True),
    ("secret", "secretName", False),
    ("scaleIO", "secretRef", True),
    ("iscsi", "secretRef", True),
    ("storageos", "secretRef", True),
    ("csi", "nodePublishSecretRef", True),
)


def _env_refs(spec: dict, env_from_key: str, key_ref_key: str) -> Iterator[str]:
    """The names every container's envFrom (``env_from_key``) and env valueFrom
    (``key_ref_key``) reference."""
    for c in _containers(spec):
        for env_from in as_list(c.get("envFrom")):
            if as_dict(env_from).get(env_from_key) is not None:
                yield ref_name(env_from[env_from_key])
        for var in as_list(c.get("env")):
            ref = as_dict(as_dict(var).get("valueFrom")).get(key_ref_key)
            if ref is not None:
                yield ref_name(ref)


def pod_secret_names(spec: dict) -> Iterator[str]:
    """upstream's VisitPodSecretNames over all containers: pull secrets, env and envFrom of every
    container, and the secrets volumes name (one source per volume, as its switch)."""
    for ref in as_list(spec.get("imagePullSecrets")):
        yield ref_name(ref)
    yield from _env_refs(spec, "secretRef", "secretKeyRef")
    for volume in as_list(spec.get("volumes")):
        volume = as_dict(volume)
        if volume.get("projected") is not None:
            for source in as_list(as_dict(volume["projected"]).get("sources")):
                if as_dict(source).get("secret") is not None:
                    yield ref_name(source["secret"])
            continue
        for source_key, ref_key, is_ref in _SECRET_VOLUME_SOURCES:
            source = volume.get(source_key)
            if source is None:
                continue
            ref = as_dict(source).get(ref_key)
            if is_ref:
                if ref is not None:
                    yield ref_name(ref)
            elif source_key == "secret" or ref:  # azureFile only with a name; secret always
                yield str(ref or "")
            break


def pod_configmap_names(spec: dict) -> Iterator[str]:
    """upstream's VisitPodConfigmapNames: env and envFrom of every container, configMap
    volumes and projected configMap sources."""
    yield from _env_refs(spec, "configMapRef", "configMapKeyRef")
    for volume in as_list(spec.get("volumes")):
        volume = as_dict(volume)
        if volume.get("configMap") is not None:
            yield ref_name(volume["configMap"])
        for source in as_list(as_dict(volume.get("projected")).get("sources")):
            if as_dict(source).get("configMap") is not None:
                yield ref_name(source["configMap"])


def pod_claim_names(pod: dict) -> Iterator[str]:
    """The PersistentVolumeClaims a pod's volumes use: ``persistentVolumeClaim.claimName``, and for an
    ``ephemeral`` volume the claim created for it, ``<pod>-<volume>`` (upstream's ephemeral.VolumeClaimName)."""
    pod_name = str(as_dict(pod.get("metadata")).get("name") or "")
    for volume in as_list(as_dict(pod.get("spec")).get("volumes")):
        volume = as_dict(volume)
        if volume.get("persistentVolumeClaim") is not None:
            claim = str(as_dict(volume["persistentVolumeClaim"]).get("claimName") or "")
        elif volume.get("ephemeral") is not None:
            claim = f"{pod_name}-{volume.get('name') or ''}"
        else:
            continue
        if claim:
            yield claim


def pod_resource_claim_names(pod: dict) -> Iterator[str]:
    """The ResourceClaims a pod uses (upstream's resourceclaim.Name for each ``spec.resourceClaims`` entry):
    the named claim, or for a template the claim ``status.resourceClaimStatuses`` records as generated
    for it; an entry whose claim is not created yet, or needs none, names nothing."""
    statuses = [as_dict(s) for s in as_list(as_dict(pod.get("status")).get("resourceClaimStatuses"))]
    for claim in as_list(as_dict(pod.get("spec")).get("resourceClaims")):
        claim = as_dict(claim)
        name: Optional[str] = None
        if claim.get("resourceClaimName") is not None:
            name = str(claim["resourceClaimName"])
        elif claim.get("resourceClaimTemplateName") is not None:
            name = next((s.get("resourceClaimName") for s in statuses if s.get("name") == claim.get("name")), None)
        if name:
            yield name


def pod_resource_claim_statuses(pod: dict) -> tuple[tuple[str, Optional[str]], ...]:
    """``status.resourceClaimStatuses`` as (entry name, claim name) pairs, in order: what upstream's
    resourceclaim.PodStatusEqual compares."""
    return tuple((str(s.get("name") or ""), s.get("resourceClaimName"))
                 for s in map(as_dict, as_list(as_dict(pod.get("status")).get("resourceClaimStatuses"))))


def pv_secret_refs(pv: dict) -> Iterator[tuple[str, str, bool]]:
    """upstream's VisitPVSecretNames: (namespace, name, whether the kubelet uses it) of each Secret a
    PersistentVolume's source names; a reference without a namespace is in the bound claim's namespace
    for the sources that always were (azureFile, cephfs, flexVolume, rbd, scaleIO, iscsi)."""
    spec = as_dict(pv.get("spec"))
    claim_namespace = str(as_dict(spec.get("claimRef")).get("namespace") or "")
    refs: list[tuple[str, str, bool]] = []

    def secret_ref(source: dict, key: str = "secretRef", default_namespace: str = claim_namespace,
                   kubelet_visible: bool = True) -> None:
        ref = source.get(key)
        if ref is not None:
            ref = as_dict(ref)
            refs.append((str(ref.get("namespace") or "") or default_namespace, ref_name(ref), kubelet_visible))

    if spec.get("azureFile") is not None:
        source = as_dict(spec["azureFile"])
        refs.append((str(source.get("secretNamespace") or "") or claim_namespace,
                     str(source.get("secretName") or ""), True))
    elif spec.get("cephfs") is not None:
        secret_ref(as_dict(spec["cephfs"]))
    elif spec.get("cinder") is not None:
        secret_ref(as_dict(spec["cinder"]), default_namespace="")
    elif spec.get("flexVolume") is not None:
        secret_ref(as_dict(spec["flexVolume"]))
    elif spec.get("rbd") is not None:
        secret_ref(as_dict(spec["rbd"]))
    elif spec.get("scaleIO") is not None:
        secret_ref(as_dict(spec["scaleIO"]))
    elif spec.get("iscsi") is not None:
        secret_ref(as_dict(spec["iscsi"]))
    elif spec.get("storageos") is not None:
        secret_ref(as_dict(spec["storageos"]), default_namespace="")
    elif spec.get("csi") is not None:
        source = as_dict(spec["csi"])
        for key, kubelet_visible in (("controllerPublishSecretRef", False), ("controllerExpandSecretRef", False),
                                     ("nodePublishSecretRef", True), ("nodeStageSecretRef", True),
                                     ("nodeExpandSecretRef", True)):
            secret_ref(source, key, default_namespace="", kubelet_visible=kubelet_visible)
    for namespace, name, kubelet_visible in refs:
        if name:  # upstream skips empty names
            yield namespace, name, kubelet_visible
