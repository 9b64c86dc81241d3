"""Find the operator an ONNX exporter could not convert in its error message.

Each exporter says it its own way; the patterns below are their wording:
  torch.onnx:  "Exporting the operator 'aten::foo' to ONNX opset version 17 is not supported"
  tf2onnx:     "Unsupported ops: Counter({'FooOp': 1})" / "... op FooOp ... not supported"
  mx2onnx:     "No conversion function registered for op type foo yet."
"""

from __future__ import annotations

import re

_PATTERNS = (
    re.compile(r"operator '([^']+)'"),
    re.compile(r"Unsupported ops: Counter\(\{'([^']+)'"),
    re.compile(r"op type (\S+?) yet"),
    re.compile(r"\bop(?:erator)? ['\"]?([A-Za-z_][\w:.]*)['\"]? (?:is )?not supported"),
)


def unsupported_operator(message: str) -> str | None:
    for pattern in _PATTERNS:
        match = pattern.search(message)
        if match:
            return match.group(1)
    return None
