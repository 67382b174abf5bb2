"""Pydantic models made without validation, from values that were validated before (a stored
event made again, a model copied with a few fields changed) or that one check showed to give
the same model (spans).

Validation is most of what making a small model costs; the session makes one per input line
(its span), per event read back and per replayed message. A model made here is equal to the
validated one field for field, with the same fields-set; its fields-set is shared by every
model with the same fields (``shared_set``: the models are frozen, and pydantic copies the set
before it changes one).
"""

from __future__ import annotations

from typing import Any

from ctx_inspect.core.model import SourceSpan

_new = object.__new__
_setattr = object.__setattr__
_SHARED_SETS: dict[frozenset[str], set[str]] = {}


def shared_set(fields: set[str]) -> set[str]:
    """One set object for every model with these fields set (the models are frozen: pydantic
    copies the set before it changes one, in ``model_copy``)."""
    key = frozenset(fields)
    shared = _SHARED_SETS.get(key)
    if shared is None:
        shared = _SHARED_SETS[key] = set(key)
    return shared


def build(cls: type[Any], data: dict[str, Any], fields: set[str]) -> Any:
    """A model from values it was validated with before (no validation again)."""
    model = _new(cls)
    _setattr(model, "__dict__", data)
    _setattr(model, "__pydantic_fields_set__", fields)
    _setattr(model, "__pydantic_extra__", None)
    _setattr(model, "__pydantic_private__", None)
    return model


def updated(model: Any, changes: dict[str, Any]) -> Any:
    """``model.model_copy(update=changes)`` (the changed fields join its fields-set) without
    pydantic's copying, for a model with neither extra nor private values (else: pydantic's)."""
    if not is_plain(model):
        return model.model_copy(update=changes)
    fields = model.__pydantic_fields_set__
    return build(type(model), {**model.__dict__, **changes}, shared_set(fields | changes.keys()))


_SPAN_SET = shared_set({"source", "offset", "length", "line"})
_span_checked: list[bool] = []  # whether building spans without validation gives the same


def make_span(source: int, offset: int, length: int, line: int) -> SourceSpan:
    """``SourceSpan(source=..., offset=..., length=..., line=...)`` without validation (one per
    input line and per body read back). Checked once against the validating constructor; on a
    difference it validates from then on."""
    if _span_checked and not _span_checked[0]:
        return SourceSpan(source=source, offset=offset, length=length, line=line)
    data = {"source": source, "offset": offset, "length": length, "line": line}
    span: SourceSpan = build(SourceSpan, data, _SPAN_SET)
    if not _span_checked:
        reference = SourceSpan(**data)
        _span_checked.append(
            span == reference
            and repr(span) == repr(reference)
            and span.model_fields_set == reference.model_fields_set
        )
        if not _span_checked[0]:
            return reference
    return span


def is_plain(model: Any) -> bool:
    """Whether ``model`` has neither extra nor private values."""
    return model.__pydantic_extra__ is None and model.__pydantic_private__ is None


def always_plain(cls: type[Any]) -> bool:
    """Whether no model of ``cls`` can have extra or private values (pydantic leaves both None
    when the class forbids extra fields and declares no private attributes)."""
    return cls.model_config.get("extra") == "forbid" and not cls.__private_attributes__
