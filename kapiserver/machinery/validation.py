"""Generic validation of names, labels and ObjectMeta, with upstream's messages.

The ``is_*`` helpers mirror ``k8s.io/apimachinery/pkg/util/validation``: each
returns the list of problems with a value (empty: valid), worded exactly like
upstream so clients and tests that match on messages keep working.
``validate_object_meta`` and ``validate_object_meta_update`` mirror
``pkg/api/validation/objectmeta.go`` and return field causes for a 422.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from kapiserver.machinery import errors
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.managedfields.fieldmanager import validate_field_manager
from kapiserver.registry.strategy import DNS1123_LABEL, DNS1123_SUBDOMAIN, PATH_SEGMENT

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL_RE = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(LABEL_VALUE_FMT)

_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                      "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                          "'-' or '.', and must start and end with an alphanumeric character")
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                      "alphabetic character, and end with an alphanumeric character")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")

FIELD_IMMUTABLE = "field is immutable"
IS_NEGATIVE = "must be greater than or equal to 0"
EMPTY_ERROR = "must be non-empty"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream's RegexError (its examples are followed by ``', '`` then `` or ``)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def is_dns1123_label(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_LABEL_MAX:
        problems.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            problems.append("must not contain dots")  # a subdomain within the length limit: dots
        else:
            problems.append(regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return problems


def is_dns1123_subdomain(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return problems


def is_dns1035_label(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1035_LABEL_MAX:
        problems.append(max_len_error(DNS1035_LABEL_MAX))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        problems.append(regex_error(_DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return problems


def is_qualified_name(value: str) -> list[str]:
    """A label/annotation key: ``[prefix/]name``, prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT,
                                                  "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    problems: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part " + EMPTY_ERROR)
        else:
            problems.extend("prefix part " + p for p in is_dns1123_subdomain(prefix))
    if not name:
        problems.append("name part " + EMPTY_ERROR)
    elif len(name) > QUALIFIED_NAME_MAX:
        problems.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        problems.append("name part " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT,
                                                   "MyName", "my.name", "123-abc"))
    return problems


def is_valid_label_value(value: str) -> list[str]:
    problems = []
    if len(value) > LABEL_VALUE_MAX:
        problems.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        problems.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return problems


def is_path_segment_name(value: str) -> list[str]:
    """Names that are safe as one URL path segment (no ``.``/``..``, ``/`` or ``%``)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return is_path_segment_prefix(value)


def is_path_segment_prefix(value: str) -> list[str]:
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]


# ---------------------------------------------------------------- name functions
#
# Upstream's ValidateNameFunc(name, prefix): ``prefix`` is true for
# generateName, which may end in a dash because a random suffix follows.


def _mask_trailing_dash(name: str) -> str:
    # upstream replaces the last two characters by "a" (not just the dash)
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool = False) -> list[str]:
    return is_path_segment_prefix(name) if prefix else is_path_segment_name(name)


NAME_VALIDATORS: dict[str, Callable[[str, bool], list[str]]] = {
    DNS1123_SUBDOMAIN: name_is_dns_subdomain,
    DNS1123_LABEL: name_is_dns_label,
    PATH_SEGMENT: name_is_path_segment,
}


# ---------------------------------------------------------------- ObjectMeta


def validate_labels(labels: Any, path: str) -> list[Cause]:
    """Keys qualified names, values label values; every problem is reported on ``path``."""
    causes: list[Cause] = []
    if not isinstance(labels, dict):
        return causes
    for key, value in labels.items():
        causes.extend(errors.field_invalid(path, key, msg) for msg in is_qualified_name(str(key)))
        value = "" if value is None else str(value)
        causes.extend(errors.field_invalid(path, value, msg) for msg in is_valid_label_value(value))
    return causes


def validate_annotations(annotations: Any, path: str) -> list[Cause]:
    """Keys qualified names (case-insensitively); keys + values at most 256 KiB in all."""
    causes: list[Cause] = []
    if not isinstance(annotations, dict):
        return causes
    total = 0
    for key, value in annotations.items():
        key = str(key)
        causes.extend(errors.field_invalid(path, key, msg) for msg in is_qualified_name(key.lower()))
        total += len(key.encode("utf-8")) + len(("" if value is None else str(value)).encode("utf-8"))
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(errors.field_too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


def validate_owner_references(refs: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(refs, list):
        return causes
    first_controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        api_version = ref.get("apiVersion") or ""
        version = api_version.rsplit("/", 1)[-1] if api_version.count("/") <= 1 else ""
        if not version:
            causes.append(errors.field_invalid(path + ".apiVersion", api_version, "version must not be empty"))
        for name in ("kind", "name", "uid"):
            if not ref.get(name):
                causes.append(errors.field_invalid(f"{path}.{name}", ref.get(name) or "", "must not be empty"))
        if ref.get("controller") is True:
            current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if first_controller:
                causes.append(errors.field_invalid(
                    path, refs, 'Only one reference can have Controller set to true. Found "true" in references '
                    f"for {first_controller} and {current}"))
            else:
                first_controller = current
    return causes


ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"


def validate_finalizers(finalizers: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(finalizers, list):
        return causes
    for finalizer in finalizers:
        finalizer = str(finalizer)
        causes.extend(errors.field_invalid(path, finalizer, msg) for msg in is_qualified_name(finalizer))
    if ORPHAN_FINALIZER in finalizers and FOREGROUND_FINALIZER in finalizers:
        causes.append(errors.field_invalid(path, finalizers, f"finalizer {ORPHAN_FINALIZER} and "
                                           f"{FOREGROUND_FINALIZER} cannot be both set"))
    return causes


def validate_object_meta(meta: dict, namespaced: bool, name_validation: str = DNS1123_SUBDOMAIN,
                         path: str = "metadata") -> list[Cause]:
    """Upstream's ValidateObjectMeta: name, namespace, generation, labels, annotations, owners, finalizers.

    ``name_validation`` is one of the name-validation constants of
    :mod:`kapiserver.registry.strategy`.  Run it after a ``generateName``
    has been turned into a name.
    """
    name_fn = NAME_VALIDATORS[name_validation]
    causes: list[Cause] = []
    generate_name = meta.get("generateName") or ""
    if generate_name:
        causes.extend(errors.field_invalid(path + ".generateName", generate_name, msg)
                      for msg in name_fn(generate_name, True))
    name = meta.get("name") or ""
    if not name:
        causes.append(errors.field_required(path + ".name", "name or generateName is required"))
    else:
        causes.extend(errors.field_invalid(path + ".name", name, msg) for msg in name_fn(name, False))
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            causes.append(errors.field_required(path + ".namespace"))
        else:
            causes.extend(errors.field_invalid(path + ".namespace", namespace, msg)
                          for msg in is_dns1123_label(namespace))
    elif namespace:
        causes.append(errors.field_forbidden(path + ".namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(errors.field_invalid(path + ".generation", generation, IS_NEGATIVE))
    causes.extend(validate_labels(meta.get("labels"), path + ".labels"))
    causes.extend(validate_annotations(meta.get("annotations"), path + ".annotations"))
    causes.extend(validate_owner_references(meta.get("ownerReferences"), path + ".ownerReferences"))
    causes.extend(validate_finalizers(meta.get("finalizers"), path + ".finalizers"))
    causes.extend(validate_managed_fields(meta.get("managedFields"), path + ".managedFields"))
    return causes


MAX_SUBRESOURCE_NAME_LENGTH = 256


def validate_managed_fields(entries: Any, path: str) -> list[Cause]:
    """Upstream's ValidateManagedFields: what a client may leave in managedFields entries."""
    causes: list[Cause] = []
    for i, entry in enumerate(entries if isinstance(entries, list) else ()):
        if not isinstance(entry, dict):
            continue
        where = f"{path}[{i}]"
        operation = entry.get("operation") or ""
        if operation not in ("Apply", "Update"):
            causes.append(errors.field_invalid(where + ".operation", operation, "must be `Apply` or `Update`"))
        fields_type = entry.get("fieldsType") or ""
        if fields_type and fields_type != "FieldsV1":
            causes.append(errors.field_invalid(where + ".fieldsType", fields_type, "must be `FieldsV1`"))
        manager = entry.get("manager")
        causes.extend(validate_field_manager(manager if isinstance(manager, str) else "", where + ".manager"))
        subresource = entry.get("subresource")
        if isinstance(subresource, str) and len(subresource) > MAX_SUBRESOURCE_NAME_LENGTH:
            causes.append(errors.field_too_long(where + ".subresource", MAX_SUBRESOURCE_NAME_LENGTH))
    return causes


_IMMUTABLE_META = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                   "deletionGracePeriodSeconds")


def validate_object_meta_update(new: dict, old: dict, path: str = "metadata") -> list[Cause]:
    """Upstream's ValidateObjectMetaUpdate: identity fields immutable, no new finalizers while deleting.

    The resourceVersion requirement is the Store's business (it decides
    whether unconditional updates are allowed), so it is not checked here.
    """
    causes: list[Cause] = []
    if old.get("deletionTimestamp"):
        old_finalizers = old.get("finalizers") or []
        added = sorted({f for f in new.get("finalizers") or [] if f not in old_finalizers})
        if added:
            rendered = ", ".join(errors.render_value(f) for f in added)
            causes.append(errors.field_forbidden(
                path + ".finalizers", "no new finalizers can be added if the object is being deleted, "
                f"found new finalizers []string{{{rendered}}}"))
    new_generation, old_generation = new.get("generation") or 0, old.get("generation") or 0
    if isinstance(new_generation, int) and isinstance(old_generation, int) and new_generation < old_generation:
        causes.append(errors.field_invalid(path + ".generation", new_generation, "must not be decremented"))
    for name in _IMMUTABLE_META:
        new_value, old_value = new.get(name), old.get(name)
        if name in ("name", "namespace", "uid", "creationTimestamp"):  # Go zero value is ""
            new_value, old_value = new_value or "", old_value or ""
        if new_value != old_value:
            causes.append(errors.field_invalid(f"{path}.{name}", new_value, FIELD_IMMUTABLE))
    return causes
