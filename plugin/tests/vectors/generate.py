#!/usr/bin/env python3
"""Regenerates msgpack.json with an independent encoder (Python `msgpack`, `pip install msgpack`).

Each vector: {"name", "hex" (msgpack bytes, lowercase), "json" (PROTOCOL.md JSON mapping)}.
Conventions the vectors keep so that every implementation produces the same bytes:
  - the shortest encoding of every int and length; floats are always float64;
  - map keys are strings, written in sorted (byte) order;
  - floats that are whole numbers are not used (an encoder may write them as ints);
  - nil appears in arrays only (a Luau table cannot hold a nil map value).
Run: python3 plugin/tests/vectors/generate.py > plugin/tests/vectors/msgpack.json
"""
import base64
import json
import math

import msgpack

V = []


def vec(name, value):
    V.append((name, value))


vec("nil", None)
vec("true", True)
vec("false", False)
for n in [0, 1, 127]:
    vec(f"positive fixint {n}", n)
for n in [128, 255]:
    vec(f"uint8 {n}", n)
for n in [256, 65535]:
    vec(f"uint16 {n}", n)
for n in [65536, 4294967295]:
    vec(f"uint32 {n}", n)
for n in [4294967296, 2**53, 2**63]:
    vec(f"uint64 {n}", n)
for n in [-1, -32]:
    vec(f"negative fixint {n}", n)
for n in [-33, -128]:
    vec(f"int8 {n}", n)
for n in [-129, -32768]:
    vec(f"int16 {n}", n)
for n in [-32769, -2147483648]:
    vec(f"int32 {n}", n)
for n in [-2147483649, -(2**53), -(2**63)]:
    vec(f"int64 {n}", n)
for x in [1.5, -0.25, 3.141592653589793, 1e300, -1.5e-300, 5e-324, -0.0]:
    vec(f"float64 {x!r}", x)
vec("float64 inf", math.inf)
vec("float64 -inf", -math.inf)
vec("float64 nan", math.nan)
vec("empty string", "")
vec("fixstr", "hello")
vec("unicode string", "h\u00e9llo w\u00f6rld \u2713 \U0001F600")
vec("str8 (40 bytes)", "x" * 40)
vec("str16 (300 bytes)", "abc" * 100)
vec("empty bin", b"")
vec("bin8", bytes([0, 1, 2, 127, 128, 254, 255]))
vec("bin16 (300 bytes)", bytes(i % 256 for i in range(300)))
vec("empty array", [])
vec("fixarray", [1, 2, 3])
vec("array with nil holes", [None, 1, None])
vec("array of one nil", [None])
vec("array ending in nil", ["a", None])
vec("array16 (20 entries)", list(range(20)))
vec("nested arrays", [[], [[]], [1, [2, [3]]]])
vec("empty map", {})
vec("fixmap", {"a": 1})
vec("nested maps", {"a": {"b": {"c": [1, {"d": "e"}]}}, "z": True})
vec("map16 (16 keys)", {f"k{i:02d}": i for i in range(16)})
vec(
    "request message",
    {"action": "exec", "args": {"script": "return 1"}, "id": 7, "t": "request", "timeoutMs": 120000},
)
vec(
    "response with nil returns",
    {"id": 7, "ok": True, "result": {"logs": [], "returns": [None, 2, None], "success": True}, "t": "response"},
)
vec("typed Vector3", {"type": "Vector3", "value": [1.5, 2.5, -3.5]})
vec("mixed array", [None, True, -1, 1.5, "s", b"\x00", [], {}])


def to_json(v):
    if isinstance(v, float):
        if math.isnan(v):
            return {"type": "number", "value": "nan"}
        if math.isinf(v):
            return {"type": "number", "value": "inf" if v > 0 else "-inf"}
        return v
    if isinstance(v, bytes):
        return {"type": "binary", "value": base64.b64encode(v).decode()}
    if isinstance(v, list):
        return [to_json(x) for x in v]
    if isinstance(v, dict):
        return {k: to_json(x) for k, x in sorted(v.items())}
    return v


def sort_maps(v):
    if isinstance(v, dict):
        return {k: sort_maps(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        return [sort_maps(x) for x in v]
    return v


out = []
for name, value in V:
    packed = msgpack.packb(sort_maps(value), use_bin_type=True)
    out.append({"name": name, "hex": packed.hex(), "json": to_json(value)})
print(json.dumps(out, indent=1, ensure_ascii=False))
