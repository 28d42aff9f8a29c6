"""``pods/{name}/eviction``: a delete that honours PodDisruptionBudgets (policy/v1 Eviction).

``kubectl drain`` evicts pods this way.  Upstream's EvictionREST decides:

* a pod that is Pending, Succeeded, Failed or already deleting is deleted at
  once, whatever the budgets;
* a pod matched by no budget is deleted; by more than one, the answer is a
  Failure Status (code 500) inside a 201, as upstream;
* with one budget: a not-ready pod may go when the budget says
  ``unhealthyPodEvictionPolicy: AlwaysAllow`` or is healthy enough; otherwise
  the budget must be up to date (``status.observedGeneration``) and allow a
  disruption (``status.disruptionsAllowed``), which the eviction uses up
  (recording the pod in ``status.disruptedPods``), or the answer is 429
  TooManyRequests with upstream's message and DisruptionBudget cause.

The pod gets the ``DisruptionTarget`` condition before it is deleted.  No
disruption controller runs here (as with envtest): a budget's status is what
clients write to ``/status``, so a new budget blocks evictions until then.
"""
from __future__ import annotations

import copy
from typing import Any, Optional

from kapiserver.apis.core.pod_conditions import is_pod_ready, update_pod_condition
from kapiserver.machinery import errors, labels, meta
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.context import Context
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.subresources import ObjectStore, Subresource, SubresourceRequest

SCHEMA = "io.k8s.api.policy.v1.Eviction"
ACCEPTED_API_VERSIONS = ("policy/v1", "policy/v1beta1")
MAX_DISRUPTED_PODS = 2000
PDB_UPDATE_ATTEMPTS = 20  # upstream's EvictionsRetry steps
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def _too_many_requests(cause: str, retry_after: int) -> errors.StatusError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return errors.StatusError(429, "TooManyRequests", VIOLATION, details, headers=headers)


def _still_processing(pdb_name: str) -> errors.StatusError:
    return _too_many_requests(f"The disruption budget {pdb_name} is still being processed by the server.", 10)


def _can_ignore_budgets(pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _enforces_resource_version(pod: dict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")


def _delete_options(eviction: dict, request: SubresourceRequest) -> DeleteOptions:
    body = eviction.get("deleteOptions")
    body = body if isinstance(body, dict) else {}
    query_dry_run = request.options.get("dryRun") or []
    body_dry_run = body.get("dryRun") or []
    if query_dry_run and body_dry_run and list(query_dry_run) != list(body_dry_run):
        raise errors.internal_error(f"Non-matching dry-run options in request and content: {query_dry_run} and "
                                    f"{body_dry_run}")
    opts = DeleteOptions.from_request({}, body)
    opts.dry_run = bool(body_dry_run or query_dry_run)
    return opts


async def _add_condition_and_delete(pods: ObjectStore, namespace: str, name: str, opts: DeleteOptions,
                                    ctx: Context) -> None:
    if not opts.dry_run:
        def mark(pod: Optional[dict]) -> dict:
            assert pod is not None
            opts.check_preconditions("Pod", "", name, pod["metadata"])
            status = pod.get("status")
            if not isinstance(status, dict):
                status = pod["status"] = {}
            update_pod_condition(status, {"type": "DisruptionTarget", "status": "True",
                                          "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"})
            return pod
        updated, _ = await pods.guaranteed_update(namespace, name, mark, "status", ctx)
        if opts.precondition_resource_version:
            opts = copy.copy(opts)
            opts.precondition_resource_version = updated["metadata"]["resourceVersion"]
    await pods.delete(namespace, name, opts, ctx)


async def _matching_budgets(budgets: ObjectStore, pod: dict) -> list[dict]:
    md = pod["metadata"]
    listed = await budgets.list(md.get("namespace", ""), ListOptions(labels.EVERYTHING, parse_field_selector("")))
    matching = []
    for pdb in listed["items"]:
        try:
            selector = labels.selector_from_label_selector_dict(
                (pdb.get("spec") or {}).get("selector"))
        except errors.StatusError:
            continue
        if selector.matches(md.get("labels") or {}):
            matching.append(pdb)
    return matching


def _set_disruption_allowed_condition(status: dict) -> None:
    """upstream's pdbhelper.UpdateDisruptionAllowedCondition (a metav1.Condition)."""
    allowed = (status.get("disruptionsAllowed") or 0) > 0
    wanted = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
              "observedGeneration": status.get("observedGeneration") or 0,
              "reason": "SufficientPods" if allowed else "InsufficientPods", "message": ""}
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    for i, old in enumerate(conditions):
        if isinstance(old, dict) and old.get("type") == wanted["type"]:
            wanted["lastTransitionTime"] = (old.get("lastTransitionTime") if old.get("status") == wanted["status"]
                                            else meta.now_rfc3339())
            conditions[i] = wanted
            return
    wanted["lastTransitionTime"] = meta.now_rfc3339()
    conditions.append(wanted)


async def _check_and_decrement(budgets: ObjectStore, pdb: dict, pod_name: str, dry_run: bool, ctx: Context) -> None:
    """Use up one allowed disruption of ``pdb`` (re-read on conflicts), or raise why not."""
    md = pdb["metadata"]
    for attempt in range(PDB_UPDATE_ATTEMPTS):
        if attempt:
            pdb = await budgets.get(md.get("namespace", ""), md["name"])
        status = copy.deepcopy(pdb.get("status") or {})
        if (status.get("observedGeneration") or 0) < (pdb["metadata"].get("generation") or 0):
            raise _still_processing(md["name"])
        allowed = status.get("disruptionsAllowed") or 0
        if allowed < 0:
            raise errors.forbidden("poddisruptionbudget", "policy", md["name"], "pdb disruptions allowed is negative")
        if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
            raise errors.forbidden("poddisruptionbudget", "policy", md["name"],
                                   "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
        if allowed == 0:
            raise _too_many_requests(f"The disruption budget {md['name']} needs {status.get('desiredHealthy') or 0} "
                                     f"healthy pods and has {status.get('currentHealthy') or 0} currently", 0)
        status["disruptionsAllowed"] = allowed - 1
        if status["disruptionsAllowed"] == 0:
            _set_disruption_allowed_condition(status)
        if dry_run:
            return
        disrupted = status.get("disruptedPods")
        if not isinstance(disrupted, dict):
            disrupted = status["disruptedPods"] = {}
        disrupted[pod_name] = meta.now_rfc3339()
        desired = copy.deepcopy(pdb)
        desired["status"] = status
        try:
            await budgets.guaranteed_update(md.get("namespace", ""), md["name"], lambda _: desired, "status", ctx,
                                            precondition_rv=pdb["metadata"]["resourceVersion"])
            return
        except errors.StatusError as e:
            if e.reason != "Conflict":
                raise
    raise errors.timeout(f"couldn't update PodDisruptionBudget \"{md['name']}\" due to conflicts")


async def evict(request: SubresourceRequest) -> tuple[int, dict]:
    eviction = request.body
    pods, namespace, name, ctx = request.store, request.namespace, request.name, request.ctx
    api_version, kind = eviction.get("apiVersion"), eviction.get("kind")
    if (api_version and api_version not in ACCEPTED_API_VERSIONS) or (kind and kind != "Eviction"):
        raise errors.bad_request(f"not a Eviction object: {kind or 'unknown'} ({api_version or 'no apiVersion'})")
    md = as_dict(eviction.get("metadata"))
    if name != (md.get("name") or ""):
        raise errors.bad_request("name in URL does not match name in Eviction object")
    if ((eviction.get("deleteOptions") or {}).get("ignoreStoreReadErrorWithClusterBreakingPotential")):
        raise errors.invalid("Eviction", "policy", name, [errors.field_invalid(
            "deleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential", True,
            "can not be set for pod eviction, try after removing the option")])
    opts = _delete_options(eviction, request)
    ctx = Context(user=ctx.user, dry_run=ctx.dry_run or opts.dry_run, warnings=ctx.warnings)
    success = errors.status_object("Success", code=201)

    pod = await pods.get(namespace, name)
    if _can_ignore_budgets(pod):
        delete_opts = opts
        if _enforces_resource_version(pod) and not opts.precondition_resource_version:
            delete_opts = copy.copy(opts)
            delete_opts.precondition_resource_version = pod["metadata"]["resourceVersion"]
        await _add_condition_and_delete(pods, namespace, name, delete_opts, ctx)
        return 201, success

    budgets = request.stores("policy", "v1", "poddisruptionbudgets")
    matching = await _matching_budgets(budgets, pod)
    if len(matching) > 1:
        return 201, errors.status_object("Failure", MORE_THAN_ONE, code=500)
    delete_opts = opts
    if matching:
        pdb = matching[0]
        spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
        unhealthy_may_go = not is_pod_ready(pod) and (
            spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
            or (status.get("currentHealthy") or 0) >= (status.get("desiredHealthy") or 0) > 0)
        if unhealthy_may_go:
            delete_opts = copy.copy(opts)
            delete_opts.precondition_resource_version = pod["metadata"]["resourceVersion"]
        else:
            await _check_and_decrement(budgets, pdb, name, opts.dry_run, ctx)
        try:
            await _add_condition_and_delete(pods, namespace, name, delete_opts, ctx)
        except errors.StatusError as e:
            if e.reason == "Conflict" and unhealthy_may_go and not opts.precondition_resource_version:
                raise _still_processing(pdb["metadata"]["name"])
            raise
        return 201, success
    await _add_condition_and_delete(pods, namespace, name, opts, ctx)
    return 201, success


def eviction_subresource() -> Subresource:
    return Subresource("eviction", ("create",), kind="Eviction", group="policy", version="v1", create=evict,
                       body_schema=SCHEMA, description="create eviction of a Pod")
