"""Plain-dict encoding of ``dp_accounting`` events, for ledgers and files.

The layout is that of ``DpEvent.to_named_tuple`` (``module_name``,
``class_name`` and the attrs fields) as nested dicts and lists, so ledgers
survive JSON, pickle and skops without trusting any extra type. Decoding only
ever instantiates classes of ``dp_accounting.dp_event``: a ledger read from a
file cannot name an arbitrary class.
"""

import json

import attr
from dp_accounting import dp_event

__all__ = ["event_from_dict", "event_key", "event_to_dict"]


def event_to_dict(event: dp_event.DpEvent) -> dict:
    """Encode a ``dp_accounting`` event as nested plain dicts and lists.

    The layout is that of ``DpEvent.to_named_tuple`` (``module_name``,
    ``class_name`` and the attrs fields), built directly because creating a
    named-tuple class per call is slow on a deletion's hot path.
    """
    data = {"module_name": type(event).__module__, "class_name": type(event).__name__}
    for name, value in attr.asdict(event, recurse=False).items():
        if isinstance(value, dp_event.DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, list | tuple):
            value = [event_to_dict(v) if isinstance(v, dp_event.DpEvent) else v for v in value]
        data[name] = value
    return data


def event_from_dict(data: dict) -> dp_event.DpEvent:
    """Decode :func:`event_to_dict` output; only ``dp_accounting.dp_event`` classes."""
    if data.get("module_name") != dp_event.__name__:
        raise ValueError(f"not a dp_accounting event: {data.get('module_name')!r}")
    cls = getattr(dp_event, data["class_name"], None)
    if not (isinstance(cls, type) and issubclass(cls, dp_event.DpEvent)):
        raise ValueError(f"unknown dp_accounting event {data['class_name']!r}")
    fields = {}
    for key, value in data.items():
        if key in ("module_name", "class_name"):
            continue
        if isinstance(value, dict):
            value = event_from_dict(value)
        elif isinstance(value, list):
            value = [event_from_dict(v) if isinstance(v, dict) else v for v in value]
        fields[key] = value
    return cls(**fields)


def event_key(event: dp_event.DpEvent) -> str:
    """A canonical string for ``event``: equal events, equal keys."""
    return json.dumps(event_to_dict(event), sort_keys=True)
