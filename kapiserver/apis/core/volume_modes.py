"""What PersistentVolumes and PersistentVolumeClaims show alike: access modes in their short form
(validation of both lives in :mod:`kapiserver.apis.core.volumes`)."""
from __future__ import annotations

from typing import Any

_SHORT = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def short_access_modes(modes: Any) -> str:
    """upstream's printer form: ``RWO,ROX`` in a fixed order."""
    modes = modes or ()
    return ",".join(_SHORT[m] for m in ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
                    if m in modes)
