"""The admission plugin registry: every plugin name upstream knows, in upstream's order.

``ALL_ORDERED_PLUGINS`` is kube-apiserver's AllOrderedPlugins and
``DEFAULT_ON`` the plugins its DefaultOffAdmissionPlugins leaves on: the
chain always runs plugins in this order, whatever order they were enabled in.
A plugin is added by registering a factory for its name (``register``);
names with no factory yet are known (they may be listed in
``admission.enable_plugins`` / ``disable_plugins``) but are skipped with a
warning when enabled, since they cannot run.

``admission.enable_plugins`` adds to the default set, ``disable_plugins``
removes from it (upstream's ``--enable-admission-plugins`` /
``--disable-admission-plugins``); a name in both, or a name upstream does not
know, is a configuration error worded as upstream's.
"""
from __future__ import annotations

import importlib
from typing import Callable, Iterable, Optional

from twisted.logger import Logger

from kapiserver.admission.config import PluginConfigs
from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.registry.admission import AdmissionChain, AdmissionPlugin

log = Logger()

ALL_ORDERED_PLUGINS = (
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    # new admission plugins go above, before the policy and webhook ones (as upstream)
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
)

DEFAULT_ON = frozenset((
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "DefaultStorageClass",
    "PersistentVolumeClaimResize",
    "DefaultTolerationSeconds",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "StorageObjectInUseProtection",
    "Priority",
    "TaintNodesByCondition",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "PodSecurity",
    # on by default but inert until its feature gate is on; kapiserver does not serve
    # MutatingAdmissionPolicy (v1alpha1 in 1.32, gate off), so it never runs
    "MutatingAdmissionPolicy",
    "ValidatingAdmissionPolicy",
))

# name -> factory(plugin configuration or None, dependencies) -> plugin
PluginFactory = Callable[[Optional[bytes], AdmissionDeps], AdmissionPlugin]
_FACTORIES: dict[str, PluginFactory] = {}

# The plugins kapiserver implements: name -> (module, factory in it).  A plugin's module is
# imported when a chain first enables it, so a start loads only the plugins it runs (the
# policy plugin pulls in the CEL engine; the default-off ones are loaded by no default start).
_BUILTIN: dict[str, tuple[str, str]] = {
    "AlwaysAdmit": ("kapiserver.admission.always", "always_admit"),
    "AlwaysDeny": ("kapiserver.admission.always", "always_deny"),
    "NamespaceLifecycle": ("kapiserver.admission.namespace_lifecycle", "namespace_lifecycle"),
    "LimitRanger": ("kapiserver.admission.limit_ranger", "limit_ranger"),
    "ServiceAccount": ("kapiserver.admission.service_account", "service_account"),
    "NodeRestriction": ("kapiserver.admission.node_restriction", "node_restriction"),
    "TaintNodesByCondition": ("kapiserver.admission.taint_nodes_by_condition", "taint_nodes_by_condition"),
    "AlwaysPullImages": ("kapiserver.admission.always_pull_images", "always_pull_images"),
    "PodSecurity": ("kapiserver.admission.pod_security.plugin", "pod_security"),
    "Priority": ("kapiserver.admission.priority", "priority"),
    "DefaultTolerationSeconds": ("kapiserver.admission.default_toleration_seconds", "default_toleration_seconds"),
    "EventRateLimit": ("kapiserver.admission.event_rate_limit", "event_rate_limit"),
    "DefaultStorageClass": ("kapiserver.admission.class_defaulting", "default_storage_class"),
    "StorageObjectInUseProtection": ("kapiserver.admission.storage_protection", "storage_object_in_use_protection"),
    "OwnerReferencesPermissionEnforcement": ("kapiserver.admission.owner_references",
                                             "owner_references_permission_enforcement"),
    "PersistentVolumeClaimResize": ("kapiserver.admission.pvc_resize", "pvc_resize"),
    "RuntimeClass": ("kapiserver.admission.runtime_class", "runtime_class"),
    "CertificateApproval": ("kapiserver.admission.certificates", "certificate_approval"),
    "CertificateSigning": ("kapiserver.admission.certificates", "certificate_signing"),
    "CertificateSubjectRestriction": ("kapiserver.admission.certificates", "certificate_subject_restriction"),
    "DefaultIngressClass": ("kapiserver.admission.class_defaulting", "default_ingress_class"),
    "MutatingAdmissionWebhook": ("kapiserver.admission.webhook.plugin", "mutating_webhook"),
    "ValidatingAdmissionPolicy": ("kapiserver.admission.policy.plugin", "validating_admission_policy"),
    "ValidatingAdmissionWebhook": ("kapiserver.admission.webhook.plugin", "validating_webhook"),
    "ResourceQuota": ("kapiserver.admission.resource_quota", "resource_quota"),
}


def register(name: str, factory: PluginFactory) -> None:
    """Make ``name`` runnable; it must be one of upstream's names (ALL_ORDERED_PLUGINS)."""
    if name not in ALL_ORDERED_PLUGINS:
        raise ValueError(f"admission plugin {name!r} is not in upstream's plugin order")
    _FACTORIES[name] = factory


def registered() -> list[str]:
    """The plugins that can run here, in order."""
    return [name for name in ALL_ORDERED_PLUGINS if name in _FACTORIES or name in _BUILTIN]


def plugin_factory(name: str) -> Optional[PluginFactory]:
    """The factory of plugin ``name`` (a registered one, else a built-in's, imported now)."""
    found = _FACTORIES.get(name)
    if found is None and name in _BUILTIN:
        module, attribute = _BUILTIN[name]
        found = _FACTORIES[name] = getattr(importlib.import_module(module), attribute)
    return found


def default_enabled() -> list[str]:
    return [name for name in ALL_ORDERED_PLUGINS if name in DEFAULT_ON]


def validate_names(enable: Iterable[str], disable: Iterable[str]) -> list[str]:
    """Upstream's AdmissionOptions.Validate: problems with the two lists, one line each."""
    enable, disable = list(enable), list(disable)
    problems = [f'enable-admission-plugins plugin "{n}" is unknown' for n in enable if n not in ALL_ORDERED_PLUGINS]
    problems += [f'disable-admission-plugins plugin "{n}" is unknown' for n in disable if n not in ALL_ORDERED_PLUGINS]
    both = sorted(set(enable) & set(disable))
    if both:
        problems.append(f"[{' '.join(both)}] in enable-admission-plugins and disable-admission-plugins overlapped")
    return problems


def enabled_plugin_names(enable: Iterable[str] = (), disable: Iterable[str] = ()) -> list[str]:
    """The plugins that are on, in upstream's order: the default set, plus ``enable``, minus ``disable``."""
    enable_set, disable_set = set(enable), set(disable)
    off = (set(ALL_ORDERED_PLUGINS) - DEFAULT_ON) | disable_set
    off -= enable_set
    return [name for name in ALL_ORDERED_PLUGINS if name not in off]


def new_chain(names: Iterable[str], configs: PluginConfigs, deps: AdmissionDeps) -> AdmissionChain:
    """Build the chain of ``names`` (already ordered); names without an implementation are skipped."""
    plugins: list[AdmissionPlugin] = []
    missing = []
    for name in names:
        factory = plugin_factory(name)
        if factory is None:
            missing.append(name)
            continue
        plugin = factory(configs.config_for(name), deps)
        plugin.name = name
        plugins.append(plugin)
    if missing:
        log.info("admission plugins enabled but not implemented by kapiserver (skipped): {names}",
                 names=", ".join(missing))
    return AdmissionChain(plugins)
