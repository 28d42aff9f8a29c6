"""Name rules used by CRDs (DNS labels/subdomains with upstream's messages).

They are the apimachinery validation helpers; this module only gives them the
short names the CRD code uses.
"""
from __future__ import annotations

from kapiserver.machinery.validation import is_dns1035_label as dns1035_label
from kapiserver.machinery.validation import is_dns1123_label as dns1123_label
from kapiserver.machinery.validation import is_dns1123_subdomain as dns1123_subdomain

__all__ = ["dns1035_label", "dns1123_label", "dns1123_subdomain"]
