"""What PersistentVolumes and PersistentVolumeClaims share: access modes and their short forms."""
from __future__ import annotations

from typing import Any

from kapiserver.machinery import errors

ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
VOLUME_MODES = ["Block", "Filesystem"]
_SHORT = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def validate_access_modes(modes: Any, path: str) -> list[errors.Cause]:
    if not modes:
        return [errors.field_required(path, "at least 1 access mode is required")]
    causes = [errors.field_not_supported(path, m, ACCESS_MODES) for m in modes if m not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        causes.append(errors.field_forbidden(path, "may not use ReadWriteOncePod with other access modes"))
    return causes


def short_access_modes(modes: Any) -> str:
    """upstream's printer form: ``RWO,ROX`` in a fixed order."""
    modes = modes or ()
    return ",".join(_SHORT[m] for m in ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
                    if m in modes)
