"""The admission configuration file (upstream's ``--admission-control-config-file``).

An ``apiserver.config.k8s.io/v1`` (or ``v1alpha1``) ``AdmissionConfiguration``
names per-plugin configuration, inline (``configuration``) or in another file
(``path``, relative to the configuration file's directory)::

    apiVersion: apiserver.config.k8s.io/v1
    kind: AdmissionConfiguration
    plugins:
    - name: ValidatingAdmissionWebhook
      configuration:
        apiVersion: apiserver.config.k8s.io/v1
        kind: WebhookAdmissionConfiguration
        kubeConfigFile: /etc/kapiserver/webhook-kubeconfig.yaml

Each plugin's factory receives its configuration as bytes (YAML or JSON), or
None when the file says nothing about it.
"""
from __future__ import annotations

import os
from typing import Any, Optional

from kapiserver.machinery.codec import yaml_problem

API_VERSIONS = ("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1", "apiserver.k8s.io/v1alpha1")


class AdmissionConfigError(Exception):
    """The configuration file cannot be used; ``str()`` is one line."""


class PluginConfigs:
    """Plugin name -> its configuration (bytes), as read from the file."""

    def __init__(self, configs: Optional[dict[str, bytes]] = None, source: str = "") -> None:
        self._configs = configs or {}
        self.source = source

    def config_for(self, name: str) -> Optional[bytes]:
        return self._configs.get(name)


def read_admission_configuration(path: str) -> PluginConfigs:
    """Parse ``path`` (empty: no configuration)."""
    if not path:
        return PluginConfigs()
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise AdmissionConfigError(f'unable to read admission control configuration from "{path}" '
                                   f"[{e.strerror}]") from None
    import yaml  # (with a configuration file only)

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AdmissionConfigError(f"{path}: invalid YAML: {yaml_problem(e)}") from None
    if not isinstance(data, dict):
        raise AdmissionConfigError(f"{path}: must be an AdmissionConfiguration object")
    if data.get("kind") != "AdmissionConfiguration" or data.get("apiVersion") not in API_VERSIONS:
        raise AdmissionConfigError(f"{path}: expected apiVersion apiserver.config.k8s.io/v1, kind "
                                   f"AdmissionConfiguration, got {data.get('apiVersion')!r}, {data.get('kind')!r}")
    unknown = set(data) - {"apiVersion", "kind", "plugins"}
    if unknown:
        raise AdmissionConfigError(f'{path}: strict decoding error: unknown field "{sorted(unknown)[0]}"')
    base = os.path.dirname(os.path.abspath(path))
    configs: dict[str, bytes] = {}
    for i, entry in enumerate(data.get("plugins") or []):
        where = f"{path}: plugins[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise AdmissionConfigError(f"{where}: must have a name")
        extra = set(entry) - {"name", "path", "configuration"}
        if extra:
            raise AdmissionConfigError(f'{where}: strict decoding error: unknown field "{sorted(extra)[0]}"')
        configs[entry["name"]] = _plugin_config(entry, base, where)
    return PluginConfigs(configs, path)


def _plugin_config(entry: dict, base: str, where: str) -> bytes:
    inline: Any = entry.get("configuration")
    if inline is not None:
        import yaml

        return yaml.safe_dump(inline).encode()
    rel = entry.get("path") or ""
    if not rel:
        return b""
    full = rel if os.path.isabs(rel) else os.path.join(base, rel)
    try:
        with open(full, "rb") as f:
            return f.read()
    except OSError as e:
        raise AdmissionConfigError(f"{where}: couldn't open admission plugin configuration {full}: "
                                   f"{e.strerror}") from None
