"""Validation of admissionregistration.k8s.io/v1 objects, with upstream's field paths and
messages (pkg/apis/admissionregistration/validation)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional
from urllib.parse import urlsplit

from kapiserver.cel.compiler import Declarations, compile_expression
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.errors import Cause

FAILURE_POLICIES = ["Fail", "Ignore"]
MATCH_POLICIES = ["Equivalent", "Exact"]
SIDE_EFFECT_CLASSES = ["None", "NoneOnDryRun", "Some", "Unknown"]
NO_SIDE_EFFECT_CLASSES = ["None", "NoneOnDryRun"]
OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
REINVOCATION_POLICIES = ["IfNeeded", "Never"]
SCOPES = ["*", "Cluster", "Namespaced"]
VALIDATION_ACTIONS = ["Audit", "Deny", "Warn"]
POLICY_REASONS = ["Forbidden", "Invalid", "RequestEntityTooLarge"]
ACCEPTED_REVIEW_VERSIONS = ("v1", "v1beta1")
MAX_AUDIT_ANNOTATIONS = 20
MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION = 5 * 1024
MAX_MATCH_CONDITIONS = 64
_CEL_IDENT = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_CEL_RESERVED = frozenset(("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
                           "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
                           "void", "while"))


def go_strings(values: Iterable[Any], type_name: str = "string") -> str:
    """A []string as Go's %#v prints it (field errors of list values)."""
    return gorepr.string_slice(list(values), type_name)


def _invalid_go(path: str, rendered: str, detail: str) -> Cause:
    """A FieldValueInvalid whose value is already in Go syntax."""
    return errors.field_invalid(path, gorepr.GoRepr(rendered), detail)


@dataclass
class Options:
    """upstream's validationOptions: what an update keeps allowing because the old object had it."""

    ignore_match_conditions: bool = False
    allow_params_in_match_conditions: bool = False
    require_no_side_effects: bool = True
    require_recognized_review_version: bool = True
    require_unique_webhook_names: bool = True
    allow_invalid_label_values: bool = False


# ------------------------------------------------------------------ rules


def _has_wildcard(items: list) -> bool:
    return "*" in items


def validate_resources(resources: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not resources:
        causes.append(errors.field_required(path))
    with_wildcard_sub: set[str] = set()
    sub_with_wildcard_res: set[str] = set()
    double_wildcard = single_wildcard = without_sub = False
    for i, entry in enumerate(resources):
        at = f"{path}[{i}]"
        if entry == "":
            causes.append(errors.field_required(at))
            continue
        if entry == "*/*":
            double_wildcard = True
        if entry == "*":
            single_wildcard = True
        if "/" not in entry:
            without_sub = entry != "*"
            continue
        res, sub = entry.split("/", 1)
        if res in with_wildcard_sub:
            causes.append(errors.field_invalid(at, entry, f"if '{res}/*' is present, must not specify {entry}"))
        if sub in sub_with_wildcard_res:
            causes.append(errors.field_invalid(at, entry, f"if '*/{sub}' is present, must not specify {entry}"))
        if sub == "*":
            with_wildcard_sub.add(res)
        if res == "*":
            sub_with_wildcard_res.add(sub)
    if len(resources) > 1 and double_wildcard:
        causes.append(_invalid_go(path, go_strings(resources),
                                                    "if '*/*' is present, must not specify other resources"))
    if single_wildcard and without_sub:
        causes.append(_invalid_go(
            path, go_strings(resources), "if '*' is present, must not specify other resources without subresources"))
    return causes


def validate_rule(rule: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    groups = list(rule.get("apiGroups") or [])
    versions = list(rule.get("apiVersions") or [])
    if not groups:
        causes.append(errors.field_required(f"{path}.apiGroups"))
    if len(groups) > 1 and _has_wildcard(groups):
        causes.append(_invalid_go(f"{path}.apiGroups", go_strings(groups),
                                                    "if '*' is present, must not specify other API groups"))
    if not versions:
        causes.append(errors.field_required(f"{path}.apiVersions"))
    if len(versions) > 1 and _has_wildcard(versions):
        causes.append(_invalid_go(f"{path}.apiVersions", go_strings(versions),
                                                    "if '*' is present, must not specify other API versions"))
    for i, version in enumerate(versions):
        if version == "":
            causes.append(errors.field_required(f"{path}.apiVersions[{i}]"))
    causes.extend(validate_resources(list(rule.get("resources") or []), f"{path}.resources"))
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        causes.append(errors.field_not_supported(f"{path}.scope", scope, SCOPES))
    return causes


def validate_rule_with_operations(rule: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    operations = list(rule.get("operations") or [])
    if not operations:
        causes.append(errors.field_required(f"{path}.operations"))
    if len(operations) > 1 and "*" in operations:
        causes.append(_invalid_go(f"{path}.operations",
                                                    go_strings(operations, "admissionregistration.OperationType"),
                                                    "if '*' is present, must not specify other operations"))
    for i, op in enumerate(operations):
        if op not in OPERATIONS:
            causes.append(errors.field_not_supported(f"{path}.operations[{i}]", op, OPERATIONS))
    return causes + validate_rule(rule, path)


# ------------------------------------------------------------------ webhooks


def is_fully_qualified_name(name: str, path: str) -> list[Cause]:
    if not name:
        return [errors.field_required(path)]
    problems = validation.is_dns1123_subdomain(name)
    if problems:
        return [errors.field_invalid(path, name, ",".join(problems))]
    if len(name.split(".")) < 3:
        return [errors.field_invalid(path, name, "should be a domain with at least three segments separated by dots")]
    return []


def validate_webhook_url(url: str, path: str) -> list[Cause]:
    form = "; desired format: https://host[/path]"
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as e:
        return [errors.field_required(path, f"url must be a valid URL: {e}{form}")]
    causes = []
    if parts.scheme != "https":
        causes.append(errors.field_invalid(path, parts.scheme, "'https' is the only allowed URL scheme" + form))
    if not parts.netloc:
        causes.append(errors.field_invalid(path, parts.netloc, "host must be specified" + form))
    if "@" in parts.netloc:
        causes.append(errors.field_invalid(path, parts.netloc.rsplit("@", 1)[0],
                                           "user information is not permitted in the URL"))
    if parts.fragment:
        causes.append(errors.field_invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        causes.append(errors.field_invalid(path, parts.query, "query parameters are not permitted in the URL"))
    return causes


def validate_webhook_service(service: dict, path: str) -> list[Cause]:
    causes = []
    if not service.get("name"):
        causes.append(errors.field_required(f"{path}.name", "service name is required"))
    if not service.get("namespace"):
        causes.append(errors.field_required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(errors.field_invalid(f"{path}.port", port,
                                           "port is not valid: must be between 1 and 65535, inclusive"))
    url_path = service.get("path")
    if url_path is None or url_path in ("", "/"):
        return causes
    if url_path == "//":
        return causes + [errors.field_invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        causes.append(errors.field_invalid(f"{path}.path", url_path, "must start with a '/'"))
    check = url_path[1:]
    if check.endswith("/"):
        check = check[:-1]
    for i, step in enumerate(check.split("/")):
        if not step:
            causes.append(errors.field_invalid(f"{path}.path", url_path, f"segment[{i}] may not be empty"))
            continue
        for problem in validation.is_dns1123_subdomain(step):
            causes.append(errors.field_invalid(f"{path}.path", url_path, f"segment[{i}]: {problem}"))
    return causes


def validate_review_versions(versions: list, required_recognized: bool, path: str) -> list[Cause]:
    if not versions:
        return [errors.field_required(path, f"must specify one of {', '.join(ACCEPTED_REVIEW_VERSIONS)}")]
    causes = []
    seen: set[str] = set()
    recognized = False
    for i, version in enumerate(versions):
        if version in seen:
            causes.append(errors.field_invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        causes.extend(errors.field_invalid(f"{path}[{i}]", version, p) for p in validation.is_dns1035_label(version))
        recognized = recognized or version in ACCEPTED_REVIEW_VERSIONS
    if required_recognized and not recognized:
        causes.append(_invalid_go(
            path, go_strings(versions), f"must include at least one of {', '.join(ACCEPTED_REVIEW_VERSIONS)}"))
    return causes


def validate_webhook(hook: dict, mutating: bool, opts: Options, path: str) -> list[Cause]:
    causes = is_fully_qualified_name(hook.get("name") or "", f"{path}.name")
    for i, rule in enumerate(hook.get("rules") or []):
        causes.extend(validate_rule_with_operations(rule if isinstance(rule, dict) else {}, f"{path}.rules[{i}]"))
    failure = hook.get("failurePolicy")
    if failure is not None and failure not in FAILURE_POLICIES:
        causes.append(errors.field_not_supported(f"{path}.failurePolicy", failure, FAILURE_POLICIES))
    match_policy = hook.get("matchPolicy")
    if match_policy is not None and match_policy not in MATCH_POLICIES:
        causes.append(errors.field_not_supported(f"{path}.matchPolicy", match_policy, MATCH_POLICIES))
    allowed_side_effects = NO_SIDE_EFFECT_CLASSES if opts.require_no_side_effects else SIDE_EFFECT_CLASSES
    side_effects = hook.get("sideEffects")
    if side_effects is None:
        causes.append(errors.field_required(f"{path}.sideEffects",
                                            f"must specify one of {', '.join(allowed_side_effects)}"))
    elif side_effects not in allowed_side_effects:
        causes.append(errors.field_not_supported(f"{path}.sideEffects", side_effects, allowed_side_effects))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        causes.append(errors.field_invalid(f"{path}.timeoutSeconds", timeout,
                                           "the timeout value must be between 1 and 30 seconds"))
    for key in ("namespaceSelector", "objectSelector"):
        if hook.get(key) is not None:
            causes.extend(validation.validate_label_selector(hook[key], f"{path}.{key}",
                                                             opts.allow_invalid_label_values))
    if mutating:
        reinvocation = hook.get("reinvocationPolicy")
        if reinvocation is not None and reinvocation not in REINVOCATION_POLICIES:
            causes.append(errors.field_not_supported(f"{path}.reinvocationPolicy", reinvocation,
                                                     REINVOCATION_POLICIES))
    cc = hook.get("clientConfig") or {}
    url, service = cc.get("url"), cc.get("service")
    if (url is None) == (service is None):
        causes.append(errors.field_required(f"{path}.clientConfig", "exactly one of url or service is required"))
    elif url is not None:
        causes.extend(validate_webhook_url(url, f"{path}.clientConfig.url"))
    elif service is not None:  # always, by the two tests above
        causes.extend(validate_webhook_service(service, f"{path}.clientConfig.service"))
    if not opts.ignore_match_conditions:
        causes.extend(validate_match_conditions(hook.get("matchConditions") or [], opts, f"{path}.matchConditions"))
    return causes


def validate_webhook_configuration(obj: dict, mutating: bool, opts: Optional[Options] = None) -> list[Cause]:
    opts = opts or Options()
    causes: list[Cause] = []
    names: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        path = f"webhooks[{i}]"
        hook = hook if isinstance(hook, dict) else {}
        causes.extend(validate_webhook(hook, mutating, opts, path))
        causes.extend(validate_review_versions(list(hook.get("admissionReviewVersions") or []),
                                               opts.require_recognized_review_version,
                                               f"{path}.admissionReviewVersions"))
        name = hook.get("name") or ""
        if opts.require_unique_webhook_names and name:
            if name in names:
                causes.append(errors.field_duplicate(f"{path}.name", name))
            names.add(name)
    return causes


def webhook_update_options(new: dict, old: dict) -> Options:
    """What an update may keep because the stored configuration already had it."""
    old_hooks = [h for h in old.get("webhooks") or [] if isinstance(h, dict)]
    new_hooks = [h for h in new.get("webhooks") or [] if isinstance(h, dict)]
    names = [h.get("name") for h in old_hooks]
    return Options(
        ignore_match_conditions=len(new_hooks) == len(old_hooks) and all(
            n.get("matchConditions") == o.get("matchConditions") for n, o in zip(new_hooks, old_hooks)),
        require_no_side_effects=all(h.get("sideEffects") in NO_SIDE_EFFECT_CLASSES for h in old_hooks),
        require_recognized_review_version=all(
            not h.get("admissionReviewVersions") or any(v in ACCEPTED_REVIEW_VERSIONS
                                                        for v in h["admissionReviewVersions"]) for h in old_hooks),
        require_unique_webhook_names=len(names) == len(set(names)),
        allow_invalid_label_values=any(validation.label_selector_has_invalid_value(h.get(key))
                                       for h in old_hooks for key in ("namespaceSelector", "objectSelector")))


# ------------------------------------------------------------------ CEL


def _cel(source: str, decls: Declarations, path: str) -> list[Cause]:
    compiled = compile_expression(source, decls)
    return [errors.field_invalid(path, source, compiled.error)] if compiled.error else []


def validate_match_conditions(conditions: list, opts: Options, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if len(conditions) > MAX_MATCH_CONDITIONS:
        causes.append(errors.field_too_many(path, len(conditions), MAX_MATCH_CONDITIONS))
    names: set[str] = set()
    decls = Declarations(has_params=opts.allow_params_in_match_conditions, has_authorizer=True)
    for i, condition in enumerate(conditions):
        at = f"{path}[{i}]"
        condition = condition if isinstance(condition, dict) else {}
        expression = (condition.get("expression") or "").strip()
        if not expression:
            causes.append(errors.field_required(f"{at}.expression"))
        else:
            causes.extend(_cel(expression, decls, f"{at}.expression"))
        name = condition.get("name") or ""
        if not name:
            causes.append(errors.field_required(f"{at}.name"))
        else:
            causes.extend(errors.field_invalid(f"{at}.name", name, p) for p in validation.is_qualified_name(name))
            if name in names:
                causes.append(errors.field_duplicate(f"{at}.name", name))
            names.add(name)
    return causes


def is_cel_identifier(name: str) -> bool:
    return bool(_CEL_IDENT.match(name)) and name not in _CEL_RESERVED


# ------------------------------------------------------------------ policies and bindings


def validate_param_kind(param_kind: dict, path: str) -> list[Cause]:
    causes = []
    api_version = param_kind.get("apiVersion") or ""
    if not api_version:
        causes.append(errors.field_required(f"{path}.apiVersion"))
    elif api_version.count("/") > 1:
        causes.append(errors.field_invalid(f"{path}.apiVersion", api_version,
                                           f"unexpected GroupVersion string: {api_version}"))
    else:
        group, _, version = api_version.rpartition("/")
        if group:
            problems = validation.is_dns1123_subdomain(group)
            if problems:
                causes.append(errors.field_invalid(f"{path}.apiVersion", group, ",".join(problems)))
        if not version:
            causes.append(errors.field_invalid(f"{path}.apiVersion", api_version, "version must be specified"))
        else:
            problems = validation.is_dns1035_label(version)
            if problems:
                causes.append(errors.field_invalid(f"{path}.apiVersion", version, ",".join(problems)))
    kind = param_kind.get("kind") or ""
    if not kind:
        causes.append(errors.field_required(f"{path}.kind"))
    else:
        problems = validation.is_dns1035_label(kind.lower())
        if problems:
            causes.append(errors.field_invalid(f"{path}.kind", kind, "may have mixed case, but should otherwise "
                                                                    "match: " + ",".join(problems)))
    return causes


def validate_match_resources(match: Optional[dict], path: str) -> list[Cause]:
    if match is None:
        return []
    causes = []
    policy = match.get("matchPolicy")
    if policy is None:
        causes.append(errors.field_required(f"{path}.matchPolicy"))
    elif policy not in MATCH_POLICIES:
        causes.append(errors.field_not_supported(f"{path}.matchPolicy", policy, MATCH_POLICIES))
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            causes.append(errors.field_required(f"{path}.{key}"))
        else:
            causes.extend(validation.validate_label_selector(match[key], f"{path}.{key}"))
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(key) or []):
            causes.extend(_named_rule(rule if isinstance(rule, dict) else {}, f"{path}.{key}[{i}]"))
    return causes


def _named_rule(rule: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, name in enumerate(rule.get("resourceNames") or []):
        causes.extend(errors.field_invalid(f"{path}.resourceNames[{i}]", name, p)
                      for p in validation.is_path_segment_name(name))
        if name in seen:
            causes.append(errors.field_duplicate(f"{path}.resourceNames[{i}]", name))
        seen.add(name)
    return causes + validate_rule_with_operations(rule, path)


def validate_policy_spec(name: str, spec: dict, opts: Options) -> list[Cause]:
    causes: list[Cause] = []
    path = "spec"
    failure = spec.get("failurePolicy")
    if failure is None:
        causes.append(errors.field_required(f"{path}.failurePolicy"))
    elif failure not in FAILURE_POLICIES:
        causes.append(errors.field_not_supported(f"{path}.failurePolicy", failure, FAILURE_POLICIES))
    param_kind = spec.get("paramKind")
    if param_kind is not None:
        opts.allow_params_in_match_conditions = True
        causes.extend(validate_param_kind(param_kind, f"{path}.paramKind"))
    constraints = spec.get("matchConstraints")
    if constraints is None:
        causes.append(errors.field_required(f"{path}.matchConstraints"))
    else:
        causes.extend(validate_match_resources(constraints, f"{path}.matchConstraints"))
        if not constraints.get("resourceRules"):
            causes.append(errors.field_required(f"{path}.matchConstraints.resourceRules"))
    if not opts.ignore_match_conditions:
        causes.extend(validate_match_conditions(spec.get("matchConditions") or [], opts, f"{path}.matchConditions"))
    has_params = param_kind is not None
    declared: list[str] = []
    variables = spec.get("variables") or []
    composition = bool(variables)
    for i, variable in enumerate(variables):
        at = f"{path}.variables[{i}]"
        variable = variable if isinstance(variable, dict) else {}
        vname = variable.get("name") or ""
        if not vname.strip():
            causes.append(errors.field_required(f"{at}.name", "name is not specified"))
        elif not is_cel_identifier(vname):
            causes.append(errors.field_invalid(f"{at}.name", vname, "name is not a valid CEL identifier"))
        expression = variable.get("expression") or ""
        if not expression.strip():
            causes.append(errors.field_required(f"{at}.expression", "expression is not specified"))
        else:
            causes.extend(_cel(expression, Declarations(has_params, True, tuple(declared), True), f"{at}.expression"))
        declared.append(vname)
    decls = Declarations(has_params, True, tuple(declared), composition)
    validations = spec.get("validations") or []
    audit_annotations = spec.get("auditAnnotations") or []
    if not validations and not audit_annotations:
        message = "validations or auditAnnotations must contain at least one item"
        causes.append(errors.field_required(f"{path}.validations", message))
        causes.append(errors.field_required(f"{path}.auditAnnotations", message))
        return causes
    for i, v in enumerate(validations):
        causes.extend(_validation(v if isinstance(v, dict) else {}, decls, opts, f"{path}.validations[{i}]"))
    if len(audit_annotations) > MAX_AUDIT_ANNOTATIONS:
        causes.append(errors.field_invalid(f"{path}.auditAnnotations", audit_annotations,
                                           f"must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"))
    keys: set[str] = set()
    for i, annotation in enumerate(audit_annotations):
        annotation = annotation if isinstance(annotation, dict) else {}
        at = f"{path}.auditAnnotations[{i}]"
        key = annotation.get("key") or ""
        if name:
            causes.extend(errors.field_invalid(f"{at}.key", f"{name}/{key}", p)
                          for p in validation.is_qualified_name(f"{name}/{key}"))
        else:
            causes.append(errors.field_invalid(f"{at}.key", key, "requires metadata.name be non-empty"))
        value = (annotation.get("valueExpression") or "").strip()
        if not value:
            causes.append(errors.field_required(f"{at}.valueExpression", "valueExpression is not specified"))
        elif len(value) > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION:
            causes.append(errors.field_required(f"{at}.valueExpression",
                                                f"must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION} bytes in "
                                                "length"))
        else:
            causes.extend(_cel(value, decls, f"{at}.valueExpression"))
        if key in keys:
            causes.append(errors.field_duplicate(f"{at}.key", key))
        keys.add(key)
    return causes


def _validation(v: dict, decls: Declarations, opts: Options, path: str) -> list[Cause]:
    causes = []
    expression = v.get("expression") or ""
    if not expression.strip():
        causes.append(errors.field_required(f"{path}.expression", "expression is not specified"))
    else:
        causes.extend(_cel(expression, decls, f"{path}.expression"))
    message_expression = v.get("messageExpression") or ""
    if message_expression and not message_expression.strip():
        causes.append(errors.field_invalid(f"{path}.messageExpression", message_expression,
                                           "must be non-empty if specified"))
    elif message_expression.strip():
        message_decls = Declarations(opts.allow_params_in_match_conditions, False, decls.variables,
                                     decls.composition)
        causes.extend(_cel(message_expression, message_decls, f"{path}.messageExpression"))
    message = v.get("message") or ""
    if message and not message.strip():
        causes.append(errors.field_invalid(f"{path}.message", message, "message must be non-empty if specified"))
    elif re.search(r"[\n\r]", message.strip()):
        causes.append(errors.field_invalid(f"{path}.message", message, "message must not contain line breaks"))
    reason = v.get("reason")
    if reason is not None and reason not in POLICY_REASONS:
        causes.append(errors.field_not_supported(f"{path}.reason", reason, POLICY_REASONS))
    return causes


def policy_update_options(new: dict, old: dict) -> Options:
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    return Options(ignore_match_conditions=new_spec.get("paramKind") == old_spec.get("paramKind")
                   and new_spec.get("matchConditions") == old_spec.get("matchConditions"))


def validate_validation_actions(actions: list, path: str) -> list[Cause]:
    causes = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in VALIDATION_ACTIONS:
            causes.append(errors.field_not_supported(f"{path}[{i}]", action, VALIDATION_ACTIONS))
        if action in seen:
            causes.append(errors.field_duplicate(f"{path}[{i}]", action))
        seen.add(action)
    if "Deny" in seen and "Warn" in seen:
        causes.append(_invalid_go(
            path, go_strings(actions, "admissionregistration.ValidationAction"),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API "
            "response and headers serves no purpose)"))
    if not seen:
        causes.append(errors.field_required(path, "at least one validation action is required"))
    return causes


def validate_param_ref(ref: Optional[dict], path: str) -> list[Cause]:
    if ref is None:
        return []
    causes: list[Cause] = []
    name, selector = ref.get("name") or "", ref.get("selector")
    if name:
        causes.extend(errors.field_invalid(f"{path}.name", name, p) for p in validation.is_path_segment_name(name))
        if selector is not None:
            causes.append(errors.field_forbidden(f"{path}.name", "name and selector are mutually exclusive"))
    if selector is not None:
        causes.extend(validation.validate_label_selector(selector, f"{path}.selector"))
        if name:
            causes.append(errors.field_forbidden(f"{path}.selector", "name and selector are mutually exclusive"))
    if not name and selector is None:
        causes.append(errors.field_required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        causes.append(errors.field_required(f"{path}.parameterNotFoundAction"))
    elif action not in ("Deny", "Allow"):
        causes.append(errors.field_not_supported(f"{path}.parameterNotFoundAction", action, ["Deny", "Allow"]))
    return causes


def validate_binding_spec(spec: dict) -> list[Cause]:
    causes = []
    policy = spec.get("policyName") or ""
    if not policy:
        causes.append(errors.field_required("spec.policyName"))
    else:
        causes.extend(errors.field_invalid("spec.policyName", policy, p)
                      for p in validation.is_dns1123_subdomain(policy))
    causes.extend(validate_param_ref(spec.get("paramRef"), "spec.paramRef"))
    causes.extend(validate_match_resources(spec.get("matchResources"), "spec.matchResources"))
    causes.extend(validate_validation_actions(list(spec.get("validationActions") or []), "spec.validationActions"))
    return causes


def validate_policy_status(status: dict) -> list[Cause]:
    causes = []
    for i, warning in enumerate(((status.get("typeChecking") or {}).get("expressionWarnings")) or []):
        warning = warning if isinstance(warning, dict) else {}
        at = f"status.typeChecking.expressionWarnings[{i}]"
        if not warning.get("warning"):
            causes.append(errors.field_required(f"{at}.warning"))
        if not (warning.get("fieldRef") or "").strip():
            causes.append(errors.field_required(f"{at}.fieldRef"))
    return causes
