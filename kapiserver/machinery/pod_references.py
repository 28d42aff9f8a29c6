"""What a pod refers to by name: the Secrets and ConfigMaps its containers and volumes use
(upstream's VisitPodSecretNames and VisitPodConfigmapNames), for the plugins that limit them."""
from __future__ import annotations

from typing import Any, Iterator


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


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
