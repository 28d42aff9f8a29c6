"""Name rules used by CRDs: DNS labels/subdomains and their upstream messages.

Upstream's ``k8s.io/apimachinery/pkg/util/validation`` returns a list of
human-readable problems per name; these functions return the same strings so
callers can wrap each one in a field error.
"""
from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
              "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
              "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                  "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
                  "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def dns1123_label(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 label (empty list: valid)."""
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL.match(value):
        errs.append(_LABEL_MSG)
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1123 subdomain."""
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN.match(value):
        errs.append(_SUBDOMAIN_MSG)
    return errs


def dns1035_label(value: str) -> list[str]:
    """Problems with ``value`` as an RFC 1035 label (CRD version names)."""
    errs = []
    if len(value) > DNS1035_LABEL_MAX:
        errs.append(_max_len(DNS1035_LABEL_MAX))
    if not _DNS1035_LABEL.match(value):
        errs.append(_DNS1035_MSG)
    return errs
