"""RFC 8785 in Python: the RFC's own vectors, refusals, and agreement with libs/evidence's
canonicalJson (run on Node through tests/js/canonicalize.mjs) on the vectors and on random documents."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest

from cairn_sdk.jcs import CanonicalJsonError, canonicalize, number_to_string, parse_json

from helpers import run_node

# RFC 8785 Appendix B: IEEE 754 doubles (as hex) and the text ECMAScript prints for them.
NUMBER_VECTORS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]

# RFC 8785 section 3.2.2 (values) and 3.2.3 (key order by UTF-16 code units).
DOCUMENT_VECTORS = [
    (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], '
        '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    ),
    (
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", '
        '"\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", "\\u00f6": "Latin Small Letter O With Diaeresis"}',
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign",'
        '"😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    ),
]

REFUSED = ['"\\ud800"', '{"a":"x\\udc00y"}', '{"\\udbff":1}', "[1, [\"\\ud83d\"]]"]


def double(hex_text: str) -> float:
    return struct.unpack(">d", bytes.fromhex(hex_text))[0]


@pytest.mark.parametrize(("bits", "expected"), NUMBER_VECTORS)
def test_numbers_print_as_ecmascript_does(bits: str, expected: str) -> None:
    assert number_to_string(double(bits)) == expected
    assert canonicalize([double(bits)]) == f"[{expected}]"


@pytest.mark.parametrize(("text", "expected"), DOCUMENT_VECTORS)
def test_the_rfc_documents(text: str, expected: str) -> None:
    assert canonicalize(parse_json(text)) == expected


def test_refuses_what_is_not_plain_json() -> None:
    for bad in (math.nan, math.inf, -math.inf, "\ud800", {"k": {1, 2}}, {1: "int key"}, b"bytes", object()):
        with pytest.raises(CanonicalJsonError):
            canonicalize(bad)
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(CanonicalJsonError, match="cycle"):
        canonicalize(cycle)
    with pytest.raises(CanonicalJsonError, match=r"\$\.a\[1\]"):
        canonicalize({"a": [1, math.nan]})
    with pytest.raises(ValueError):
        parse_json("[NaN]")


def test_integers_are_doubles_as_json_parse_makes_them() -> None:
    assert canonicalize(2**53 + 1) == "9007199254740992"
    assert canonicalize(10**21) == "1e+21"
    assert canonicalize(-0.0) == "0"
    assert canonicalize(True) == "true"


def _random_string(rng: random.Random) -> str:
    pools = [
        lambda: chr(rng.randrange(0x00, 0x20)),
        lambda: rng.choice('"\\/\b\f\n\r\t\u2028\u2029\u007f\u0080\u00ff'),
        lambda: chr(rng.randrange(0x20, 0x7F)),
        lambda: chr(rng.randrange(0x80, 0xD800)),
        lambda: chr(rng.randrange(0xE000, 0x10000)),
        lambda: chr(rng.randrange(0x10000, 0x110000)),
    ]
    return "".join(rng.choice(pools)() for _ in range(rng.randrange(0, 12)))


def _random_number(rng: random.Random) -> float | int:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.randrange(-(2**63), 2**63)
    if kind == 1:
        return rng.randrange(-1000, 1000)
    if kind == 2:
        value = struct.unpack(">d", rng.getrandbits(64).to_bytes(8, "big"))[0]
        return value if math.isfinite(value) else 0.5
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind == 4:
        value = float(f"{rng.randrange(1, 10)}e{rng.randrange(-330, 310)}")
        return value if math.isfinite(value) else 1e308
    return rng.random() * 10 ** rng.randrange(-30, 30)


def _random_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return _random_number(rng)
    if kind in (3, 4):
        return _random_string(rng)
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    return {_random_string(rng): _random_value(rng, depth + 1) for _ in range(rng.randrange(0, 6))}


def test_agrees_with_the_typescript_canonicalizer() -> None:
    rng = random.Random(8785)
    texts = [text for text, _ in DOCUMENT_VECTORS]
    texts += [json.dumps([double(bits)]) for bits, _ in NUMBER_VECTORS]
    texts += REFUSED
    # ensure_ascii: astral characters travel as surrogate pairs, which both sides read back the same.
    texts += [json.dumps(_random_value(rng), ensure_ascii=True) for _ in range(1500)]
    answers = json.loads(run_node("canonicalize.mjs", stdin=json.dumps(texts)))
    assert len(answers) == len(texts)
    refused = 0
    for text, answer in zip(texts, answers):
        try:
            ours = {"ok": canonicalize(parse_json(text))}
        except CanonicalJsonError:
            ours = None
        if "error" in answer:
            refused += 1
            assert ours is None, f"TypeScript refused {text!r} ({answer['error']}); Python made {ours}"
        else:
            assert ours == answer, f"for {text!r}"
    assert refused == len(REFUSED)
