"""Request lines out and reply lines in: each request class's encoder, and the common ack read without a JSON parser."""

from __future__ import annotations

import dataclasses
import json
import json.encoder
import re
from typing import Any, Callable

from .models import UNSET, Ack, Request, _plan, _wire

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_string: Callable[[str], str] = json.encoder.encode_basestring
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)


def _compact() -> Callable[[Any], str]:
    """The text of any JSON value as `_ENCODER.encode` writes it; with the C accelerator, one encoder made once
    (`encode` makes one a call) and no check for cycles (what `_wire` gives has none)."""
    if _make_encoder is None:
        return _ENCODER.encode
    chunks = _make_encoder(None, _ENCODER.default, _string, None, ":", ",", False, False, True)

    def encode(value: Any) -> str:
        return "".join(chunks(value, 0))

    return encode


_json = _compact()

# A request class's encoder: the line of one request with its `rid` (and `"route":"direct"`).
LineEncoder = Callable[[Any, int, bool], bytes]
_LINE_ENCODERS: dict[type, LineEncoder] = {}


def request_line(request: Request | dict[str, Any], rid: int, direct: bool = False) -> bytes:
    """`{**request.to_wire(), "rid": rid}` (plus `"route":"direct"`) as one NDJSON line, byte for byte what
    the JSON encoder writes, without building the object: the members in field order, None left out."""
    if isinstance(request, dict):
        body = dict(request)
        body["rid"] = rid
        if direct:
            body["route"] = "direct"
        return (_json(body) + "\n").encode()
    encode = _LINE_ENCODERS.get(type(request))
    if encode is None:
        encode = _LINE_ENCODERS[type(request)] = _compile(type(request))
    return encode(request, rid, direct)


def _compile(cls: type) -> LineEncoder:
    """Straight-line code for `cls`: a string member is escaped in place; anything else goes through
    `_wire` and the encoder, as `to_wire` would have it."""
    names, null_ok = _plan(cls)
    op = getattr(cls, "op")
    head = '{"op":' + _json(op)
    code = ["def encode(request, rid, direct):", f"    text = {head!r}"]
    for f in dataclasses.fields(cls):
        key = repr("," + _json(names[f.name]) + ":")
        code.append(f"    v = request.{f.name}")
        if f.name in null_ok:
            code.append(f"    if v is None: text += {key} + 'null'")
            code.append(f"    elif v.__class__ is str: text += {key} + string(v)")
            code.append(f"    elif v is not UNSET: text += {key} + json(wire(v))")
        else:
            code.append("    if v is not None:")
            code.append(f"        if v.__class__ is str: text += {key} + string(v)")
            code.append(f"        elif v is not UNSET: text += {key} + json(wire(v))")
    code.append("    text += ',\"rid\":' + str(rid)")
    code.append("    if direct: text += ',\"route\":\"direct\"'")
    code.append("    return (text + '}\\n').encode()")
    scope: dict[str, Any] = {"UNSET": UNSET, "string": _string, "json": _json, "wire": _wire}
    exec("\n".join(code), scope)
    encoder: LineEncoder = scope["encode"]
    return encoder


# The ack of a state-changing op that stored one event without warnings, as the server writes it (members
# sorted, `duplicate` only when true): `{"ok":true,"partition":0,"rid":7,"seq":42,"warnings":[]}`.
_ACK_LINE = re.compile(rb'\{(?:"duplicate":(true|false),)?"ok":true,"partition":(\d+),"rid":(\d+),"seq":(\d+),"warnings":\[\]\}')


def read_ack(line: bytes) -> Ack | None:
    """The `Ack` of a line that is the common ack, read by a pattern instead of a JSON parser (its `raw` equal to
    what `json.loads` gives); None for any other line."""
    m = _ACK_LINE.fullmatch(line)
    if m is None:
        return None
    duplicate, partition, rid, seq = m.groups()
    p, s = int(partition), int(seq)
    if duplicate is None:
        return Ack({"ok": True, "partition": p, "rid": int(rid), "seq": s, "warnings": []}, s, False, [], p)
    d = duplicate == b"true"
    return Ack({"duplicate": d, "ok": True, "partition": p, "rid": int(rid), "seq": s, "warnings": []}, s, d, [], p)
