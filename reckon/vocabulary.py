"""One vocabulary for the event-time rules: the names people type, code uses and the
warehouse stores (issue 63).

- **watermark bound** L: setting ``watermark_bound``, flag ``--watermark-bound``,
  ``RECKON_WATERMARK_BOUND``, ``Settings.watermark_bound``, ``WatermarkPolicy.watermark_bound``;
- **allowed lateness** G: ``allowed_lateness``, ``--allowed-lateness``,
  ``EventTimeRules.allowed_lateness``, ``is_beyond_allowed_lateness``;
- **bound what-if**: what the day would have been under other bounds, ``reckon bound-whatif``
  (a warehouse's day) and ``reckon bound-whatif-curve`` (a file of events).

Why one module: the first names (``lateness`` for the bound, ``grace`` for the allowed
lateness, ``reckon lateness`` for the what-if) still work where users type them, with a
warning, and stay as the keys of what a warehouse has recorded, so that old warehouses, old
report databases and old readers open unchanged. Those three mappings live here, once.

Example:

>>> from_stored({"lateness": "5s", "grace": "0s", "window": "1m"})
{'watermark_bound': '5s', 'allowed_lateness': '0s', 'window': '1m'}
>>> to_stored({"watermark_bound": "5s", "window": "1m"})
{'lateness': '5s', 'window': '1m'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEPRECATED_COMMANDS", "DEPRECATED_SETTINGS", "STORED_KEYS", "from_stored",
           "stored_key", "to_stored"]

#: A setting's first name -> its name now: accepted, with a warning once, as a TOML key, a
#: ``RECKON_*`` variable, a ``--flag`` and a Python keyword.
DEPRECATED_SETTINGS: Mapping[str, str] = {
    "lateness": "watermark_bound",  # vocabulary: keep
    "grace": "allowed_lateness",  # vocabulary: keep
}

#: A field -> the key a warehouse records it by (the event-time spec, a batch's
#: ``rules_json``, an audit run's parameters, the report's configuration.csv): the first
#: names, written as they always were.
STORED_KEYS: Mapping[str, str] = {new: old for old, new in DEPRECATED_SETTINGS.items()}

#: A command's first name -> its name now (``reckon lateness`` still runs, with a warning).
DEPRECATED_COMMANDS: Mapping[str, str] = {
    "lateness": "bound-whatif",  # vocabulary: keep
    "lateness-curve": "bound-whatif-curve",  # vocabulary: keep
}


def stored_key(name: str) -> str:
    """The key ``name`` is recorded by.

    >>> stored_key("allowed_lateness"), stored_key("window")
    ('grace', 'window')
    """
    return STORED_KEYS.get(name, name)


def to_stored(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` keyed as a warehouse records them (the first names), order kept."""
    return {stored_key(name): value for name, value in values.items()}


def from_stored(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded mapping in the names code uses. Either key is read (a record written by
    this version holds the first names; one keyed by the new names is read the same); a
    record holding both keeps the new one. Idempotent.

    >>> from_stored({"watermark_bound": "2s", "lateness": "5s"})
    {'watermark_bound': '2s'}
    """
    out: dict[str, Any] = {}
    for name, value in recorded.items():
        new = DEPRECATED_SETTINGS.get(name, name)
        if new != name and new in recorded:
            continue
        out[new] = value
    return out
