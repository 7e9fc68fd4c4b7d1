"""RFC 8785 (JSON Canonicalization Scheme), written here rather than taken from a library.

It must produce byte for byte what ``libs/evidence``'s ``canonicalJson`` produces, since a receipt's
hash is ``sha256(prev_hash + "\\n" + canonical(body))``. What that takes in Python:

- numbers are IEEE 754 doubles, printed as ECMAScript's Number-to-String prints them (``1e+21``,
  ``1e-7``, ``0.000001``, ``-0`` as ``0``); a Python ``int`` is taken as the double JSON.parse would
  make of it, so ``2**53 + 1`` prints as JavaScript would print it; NaN and infinities are refused;
- object keys are sorted by their UTF-16 code units, not by code points (``"\\ue000"`` sorts after
  ``"\\U0001f600"``, whose first unit is a high surrogate);
- strings are escaped exactly as ``JSON.stringify`` does: ``\\"``, ``\\\\``, ``\\b\\f\\n\\r\\t``, other
  control characters as ``\\u00xx``, everything else (U+2028, DEL, non-ASCII) as it is; a lone
  surrogate is refused;
- only plain JSON data: ``None``, ``bool``, ``int``, ``float``, ``str``, ``list``/``tuple`` and ``dict``
  with ``str`` keys; anything else is refused, never guessed at.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CanonicalJsonError", "canonicalize", "canonicalize_bytes", "number_to_string", "parse_json"]


class CanonicalJsonError(ValueError):
    """A value that is not canonicalisable JSON; ``path`` says where (``$.a[0].b``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"not canonicalisable JSON at {path}: {problem}")
        self.path = path
        self.problem = problem


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(value: str, path: str) -> str:
    out = ['"']
    for char in value:
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            raise CanonicalJsonError(path, "string contains a lone surrogate")
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif code < 0x20:
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def number_to_string(value: float | int) -> str:
    """ECMAScript's Number::toString(10) of the double nearest ``value`` (RFC 8785 section 3.2.2.3)."""
    x = float(value)
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"non-finite number {value!r}")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + number_to_string(-x)
    # repr() gives the shortest digits that round-trip, as ECMAScript requires; take them apart.
    text = repr(x)
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # n: the position of the decimal point relative to the digits (x = 0.digits × 10^n).
    point = len(whole) + (int(exponent) if exponent else 0)
    leading_zeros = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    n = point - leading_zeros
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    sign = "+" if e >= 0 else "-"
    if k == 1:
        return f"{digits}e{sign}{abs(e)}"
    return f"{digits[0]}.{digits[1:]}e{sign}{abs(e)}"


def _utf16_key(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare as the code units do.
    return key.encode("utf-16-be", "surrogatepass")


def _serialise(value: Any, path: str, ancestors: set[int]) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int or type(value) is float:
        try:
            return number_to_string(value)
        except ValueError as error:
            raise CanonicalJsonError(path, str(error)) from None
        except OverflowError:
            raise CanonicalJsonError(path, f"{value} is beyond a double's range") from None
    if type(value) is str:
        return _string(value, path)
    if type(value) is list or type(value) is tuple:
        if id(value) in ancestors:
            raise CanonicalJsonError(path, "cycle")
        ancestors.add(id(value))
        try:
            return "[" + ",".join(_serialise(item, f"{path}[{i}]", ancestors) for i, item in enumerate(value)) + "]"
        finally:
            ancestors.discard(id(value))
    if type(value) is dict:
        if id(value) in ancestors:
            raise CanonicalJsonError(path, "cycle")
        ancestors.add(id(value))
        try:
            for key in value:
                if type(key) is not str:
                    raise CanonicalJsonError(path, f"a key must be a string, not {type(key).__name__}")
            parts = []
            for key in sorted(value, key=_utf16_key):
                child = f"{path}.{key}"
                parts.append(f"{_string(key, child)}:{_serialise(value[key], child, ancestors)}")
            return "{" + ",".join(parts) + "}"
        finally:
            ancestors.discard(id(value))
    raise CanonicalJsonError(path, f"{type(value).__name__} is not plain JSON data")


def canonicalize(value: Any) -> str:
    """The RFC 8785 text of ``value``; ``CanonicalJsonError`` for anything that is not plain JSON data."""
    return _serialise(value, "$", set())


def canonicalize_bytes(value: Any) -> bytes:
    return canonicalize(value).encode("utf-8")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str | bytes) -> Any:
    """JSON as ``JSON.parse`` reads it: every number a double, NaN/Infinity refused, the last duplicate key wins."""
    import json

    return json.loads(text, parse_int=float, parse_constant=_refuse_constant)
