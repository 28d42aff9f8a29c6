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


def register(name: str, factory: PluginFactory) -> None:
    """Make ``name`` runnable; it must be one of upstream's names (ALL_ORDERED_PLUGINS)."""
    if name not in ALL_ORDERED_PLUGINS:
        raise ValueError(f"admission plugin {name!r} is not in upstream's plugin order")
    _FACTORIES[name] = factory


def registered() -> list[str]:
    """The plugins that can run here, in order."""
    _register_builtin()
    return [name for name in ALL_ORDERED_PLUGINS if name in _FACTORIES]


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
    _register_builtin()
    plugins: list[AdmissionPlugin] = []
    missing = []
    for name in names:
        factory = _FACTORIES.get(name)
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


_builtin_registered = False


def _register_builtin() -> None:
    """Register the plugins kapiserver implements (imported lazily: they pull in the CEL engine)."""
    global _builtin_registered
    if _builtin_registered:
        return
    _builtin_registered = True
    from kapiserver.admission.namespace_lifecycle import PLUGIN_NAME as LIFECYCLE, NamespaceLifecycle
    from kapiserver.admission.policy.plugin import PLUGIN_NAME as VAP, validating_admission_policy
    from kapiserver.admission.always import ALWAYS_ADMIT, ALWAYS_DENY, AlwaysAdmit, AlwaysDeny
    from kapiserver.admission.certificates import (CertificateApproval, CertificateSigning,
                                                   CertificateSubjectRestriction)
    from kapiserver.admission.webhook.plugin import MUTATING, VALIDATING, mutating_webhook, validating_webhook

    _FACTORIES.setdefault(ALWAYS_ADMIT, lambda config, deps: AlwaysAdmit())
    _FACTORIES.setdefault(ALWAYS_DENY, lambda config, deps: AlwaysDeny())
    _FACTORIES.setdefault(LIFECYCLE, lambda config, deps: NamespaceLifecycle(
        lambda: deps.store("", "v1", "namespaces")))
    _FACTORIES.setdefault(CertificateApproval.name, lambda config, deps: CertificateApproval(deps.authorizer))
    _FACTORIES.setdefault(CertificateSigning.name, lambda config, deps: CertificateSigning(deps.authorizer))
    _FACTORIES.setdefault(CertificateSubjectRestriction.name, lambda config, deps: CertificateSubjectRestriction())
    _FACTORIES.setdefault(MUTATING, mutating_webhook)
    _FACTORIES.setdefault(VALIDATING, validating_webhook)
    _FACTORIES.setdefault(VAP, validating_admission_policy)
    from kapiserver.admission.resource_quota import PLUGIN_NAME as QUOTA, resource_quota
    _FACTORIES.setdefault(QUOTA, resource_quota)
    from kapiserver.admission.limit_ranger import limit_ranger
    from kapiserver.admission.default_toleration_seconds import default_toleration_seconds
    _FACTORIES.setdefault("DefaultTolerationSeconds", default_toleration_seconds)
    from kapiserver.admission.service_account import PLUGIN_NAME as SERVICE_ACCOUNT, service_account
    _FACTORIES.setdefault(SERVICE_ACCOUNT, service_account)
    _FACTORIES.setdefault("LimitRanger", limit_ranger)
    from kapiserver.admission.class_defaulting import default_ingress_class, default_storage_class
    _FACTORIES.setdefault("DefaultStorageClass", default_storage_class)
    _FACTORIES.setdefault("DefaultIngressClass", default_ingress_class)
    from kapiserver.admission.storage_protection import StorageObjectInUseProtection
    _FACTORIES.setdefault(StorageObjectInUseProtection.name, lambda config, deps: StorageObjectInUseProtection())
    from kapiserver.admission.pvc_resize import pvc_resize
    _FACTORIES.setdefault("PersistentVolumeClaimResize", pvc_resize)
    from kapiserver.admission.owner_references import PLUGIN_NAME as OWNERS, owner_references_permission_enforcement
    _FACTORIES.setdefault(OWNERS, owner_references_permission_enforcement)
    from kapiserver.admission.event_rate_limit import PLUGIN_NAME as EVENTS, event_rate_limit
    _FACTORIES.setdefault(EVENTS, event_rate_limit)
    from kapiserver.admission.pod_security.plugin import PLUGIN_NAME as POD_SECURITY, pod_security
    _FACTORIES.setdefault(POD_SECURITY, pod_security)
    from kapiserver.admission.priority import PLUGIN_NAME as PRIORITY, priority
    _FACTORIES.setdefault(PRIORITY, priority)
    from kapiserver.admission.taint_nodes_by_condition import PLUGIN_NAME as TAINTS, taint_nodes_by_condition
    _FACTORIES.setdefault(TAINTS, taint_nodes_by_condition)
    from kapiserver.admission.runtime_class import PLUGIN_NAME as RUNTIME_CLASS, runtime_class
    _FACTORIES.setdefault(RUNTIME_CLASS, runtime_class)
    from kapiserver.admission.always_pull_images import PLUGIN_NAME as ALWAYS_PULL, always_pull_images
    _FACTORIES.setdefault(ALWAYS_PULL, always_pull_images)
    from kapiserver.admission.node_restriction import PLUGIN_NAME as NODE_RESTRICTION, node_restriction
    _FACTORIES.setdefault(NODE_RESTRICTION, node_restriction)
