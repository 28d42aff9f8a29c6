"""The worked example of docs/admission.md, run as it is written there.

The Python block after ``<!-- example: webhook test -->`` is compiled into this
module, so trial collects its test case like any other.
"""
from __future__ import annotations

import os
import re

from kapiserver.testing.process import REPO_ROOT

_DOC = os.path.join(REPO_ROOT, "docs", "admission.md")


def example_source(marker: str = "webhook test") -> str:
    with open(_DOC) as f:
        text = f.read()
    m = re.search(rf"<!-- example: {re.escape(marker)} -->\n```python\n(.*?)\n```", text, re.S)
    if m is None:
        raise AssertionError(f"docs/admission.md has no example {marker!r}")
    # blank lines in front, so tracebacks point at the right lines of the document
    return "\n" * text.count("\n", 0, m.start(1)) + m.group(1)


_example: dict = {"__name__": __name__}
exec(compile(example_source(), _DOC, "exec"), _example)  # noqa: S102 (the documentation's own code)
WebhookExampleTest = _example["WebhookExampleTest"]
