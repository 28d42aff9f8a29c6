"""The built-in kinds this server serves, as resource type descriptions."""
from __future__ import annotations

from kapiserver.apis.admissionregistration import (validatingadmissionpolicies, validatingadmissionpolicybindings,
                                                   webhookconfigurations)
from kapiserver.apis.apps import controllerrevisions, daemonsets, deployments, replicasets, statefulsets
from kapiserver.apis.authentication import self_subject_reviews, token_reviews
from kapiserver.apis.authorization import access_reviews
from kapiserver.apis.autoscaling import horizontalpodautoscalers, horizontalpodautoscalers_v1
from kapiserver.apis.batch import cronjobs, jobs
from kapiserver.apis.certificates import certificatesigningrequests
from kapiserver.apis.coordination import leases
from kapiserver.apis.core import configmaps, events, namespaces, secrets, serviceaccounts
from kapiserver.apis.core import (bindings, componentstatuses, endpoints, limitranges, nodes, persistentvolumeclaims,
                                  persistentvolumes, pods, podtemplates, replicationcontrollers, resourcequotas,
                                  services)
from kapiserver.apis.discovery import endpointslices
from kapiserver.apis.events import events as events_v1
from kapiserver.apis.flowcontrol import flowschemas, prioritylevelconfigurations
from kapiserver.apis.networking import ingressclasses, ingresses, networkpolicies
from kapiserver.apis.policy import poddisruptionbudgets
from kapiserver.apis.rbac import clusterrolebindings, clusterroles, rolebindings, roles
from kapiserver.apis.scheduling import priorityclasses
from kapiserver.apis.node import runtimeclasses
from kapiserver.apis.storage import (csidrivers, csinodes, csistoragecapacities, storageclasses,
                                     volumeattachments)
from kapiserver.registry.resource_type import ResourceType


def builtin_resource_types() -> list[ResourceType]:
    """Fresh descriptions (callers may adjust them, e.g. the events TTL)."""
    return [
        namespaces.resource_type(),
        configmaps.resource_type(),
        secrets.resource_type(),
        serviceaccounts.resource_type(),
        events.resource_type(),
        events_v1.resource_type(),
        leases.resource_type(),
        pods.resource_type(),
        bindings.resource_type(),
        componentstatuses.resource_type(),
        services.resource_type(),
        endpoints.resource_type(),
        persistentvolumeclaims.resource_type(),
        persistentvolumes.resource_type(),
        nodes.resource_type(),
        podtemplates.resource_type(),
        replicationcontrollers.resource_type(),
        resourcequotas.resource_type(),
        limitranges.resource_type(),
        roles.resource_type(),
        clusterroles.resource_type(),
        rolebindings.resource_type(),
        clusterrolebindings.resource_type(),
        ingresses.resource_type(),
        ingressclasses.resource_type(),
        networkpolicies.resource_type(),
        poddisruptionbudgets.resource_type(),
        storageclasses.resource_type(),
        csidrivers.resource_type(),
        csinodes.resource_type(),
        csistoragecapacities.resource_type(),
        volumeattachments.resource_type(),
        runtimeclasses.resource_type(),
        priorityclasses.resource_type(),
        endpointslices.resource_type(),
        horizontalpodautoscalers.resource_type(),
        horizontalpodautoscalers_v1.resource_type(),
        deployments.resource_type(),
        replicasets.resource_type(),
        statefulsets.resource_type(),
        daemonsets.resource_type(),
        controllerrevisions.resource_type(),
        jobs.resource_type(),
        cronjobs.resource_type(),
        certificatesigningrequests.resource_type(),
        webhookconfigurations.mutating_resource_type(),
        webhookconfigurations.validating_resource_type(),
        validatingadmissionpolicies.resource_type(),
        validatingadmissionpolicybindings.resource_type(),
        flowschemas.resource_type(),
        prioritylevelconfigurations.resource_type(),
        *access_reviews.resource_types(),
        self_subject_reviews.resource_type(),
        token_reviews.resource_type(),
    ]
