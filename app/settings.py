"""Settings loaded as a user gives them: built-in defaults < a TOML file < RECKON_* < flags.

The values and their rules are reckon.config's (``Settings``, pure); this module reads where
they come from: the file (``$RECKON_CONFIG`` or ``./reckon.toml`` when present, see
``reckon.example.toml``) and the ``RECKON_*`` environment, refusing an unknown key or a
misspelt variable in one line naming the nearest setting, and warning once per process about a
deprecated name (reckon.vocabulary ``DEPRECATED_SETTINGS``: the watermark bound's and the
allowed lateness's first names still work). Secrets (database passwords) belong in the
environment, never in the file.

Example::

    settings = load_settings()                       # file + environment
    settings = load_settings(env={}, window="1m")    # defaults + one value, as a test does
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from reckon.config import (
    DEPRECATED_SETTINGS,
    Settings,
    _coerce_all,
    flag,
    fold_deprecated,
    keywords_of,
    nearest,
    setting_names,
)
from reckon.errors import ConfigError

__all__ = ["load_settings", "warn_renamed"]

_WARNED: set[str] = set()


def warn_renamed(old: str, new: str) -> None:
    """One line on stderr, once per process, that ``old`` still works but ``new`` is its name:
    a config is read several times in one run, the warning should not be.

    >>> warn_renamed("--grace", "--allowed-lateness")  # doctest: +SKIP
    reckon: warning: --grace is deprecated, use --allowed-lateness
    """
    if old not in _WARNED:
        _WARNED.add(old)
        print(f"reckon: warning: {old} is deprecated, use {new}", file=sys.stderr)


def _warned(folded: tuple[dict[str, Any], dict[str, str], list[tuple[str, str]]]
            ) -> tuple[dict[str, Any], dict[str, str]]:
    values, names, deprecated = folded
    for old, new in deprecated:
        warn_renamed(old, new)
    return values, names


def load_settings(path: str | os.PathLike[str] | None = None,
                  env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Defaults, then the TOML file, then RECKON_* variables, then keyword overrides (by
    setting name; a deprecated one, ``lateness=``, works with a DeprecationWarning)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    file = path or env.get("RECKON_CONFIG") or ("reckon.toml" if Path("reckon.toml").is_file()
                                                else None)
    if file:
        from_file, keys, section = _read_file(Path(file))
        values.update(from_file)
        origins.update({k: f"{section}{keys[k]} in {str(file)!r}" for k in from_file})
    names = setting_names() | set(DEPRECATED_SETTINGS)
    _refuse_misspelt_env(env, names)
    from_env, env_names = _warned(fold_deprecated(
        {n: env["RECKON_" + n.upper()] for n in sorted(names) if "RECKON_" + n.upper() in env},
        lambda n: "RECKON_" + n.upper()))
    values.update(from_env)
    origins.update({k: "RECKON_" + env_names[k].upper() for k in from_env})
    given = keywords_of(overrides)
    values.update(given)
    origins.update({k: flag(k) for k in given})
    return Settings(**_coerce_all(values), origins=origins)


def _read_file(p: Path) -> tuple[dict[str, Any], dict[str, str], str]:
    """The file's settings by field, the name each was written by, and its section prefix.

    Keys go under ``[reckon]`` (or, in a file without it, at the top). A map setting may
    also be written as a table of its own, ``[watermark_bound_by_source]`` after
    ``[reckon]`` (TOML ends ``[reckon]`` there): it is taken as that setting, as a reader
    of the file expects; set in both places, it is refused. Any other key or table is
    refused, naming the nearest setting.
    """
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist (RECKON_CONFIG or --config)")
    with p.open("rb") as fh:
        try:
            raw = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
    section = "" if "reckon" not in raw else "[reckon] "
    given = dict(raw.get("reckon", raw))
    maps = {f.name for f in fields(Settings) if f.type == "Mapping[str, str]"}
    for table, value in raw.items() if "reckon" in raw else ():
        if table == "reckon":
            continue
        if table not in maps or not isinstance(value, dict):
            raise ConfigError(f"config file {str(p)!r}: [{table}] is not a table reckon "
                              f"reads{nearest(table, {'reckon', *maps}, lambda t: f'[{t}]')}"
                              " (settings go under [reckon])")
        if given.get(table):
            raise ConfigError(f"config file {str(p)!r} sets {table} twice, in [reckon] and "
                              f"as [{table}]: keep one")
        given[table] = value
    for key in given:
        if key not in setting_names() | set(DEPRECATED_SETTINGS):
            raise ConfigError(f"unknown setting {key!r} in {str(p)!r}"
                              f"{nearest(key, setting_names())}")
    values, keys = _warned(fold_deprecated(given, lambda k: section + k, f" in {str(p)!r}"))
    return values, keys, section


#: RECKON_* variables that are not settings but are read elsewhere (the config file, the
#: Airflow DAG, the bench, a profiler switch): never taken for a misspelt setting
_NOT_SETTINGS = frozenset({"RECKON_BENCH_POSTMORTEM_WAREHOUSE",  # bench/postmortem_bench.py
                           "RECKON_BENCH_POSTMORTEM_REPEATS",  # bench/postmortem_bench.py
                           "RECKON_CONFIG", "RECKON_DB_PASSWORD", "RECKON_AIRFLOW_RETRIES",
                           "RECKON_PROFILE",
                           "RECKON_VENV", "RECKON_EXECUTOR_PYTHON", "RECKON_CACHE"})


def _refuse_misspelt_env(env: Mapping[str, str], names: set[str]) -> None:
    """A ``RECKON_*`` variable that is not a setting (nor one of the few other tools read,
    ``_NOT_SETTINGS``) is a mistake: refused in one line naming the nearest setting, as the
    config file refuses an unknown key. Silently ignored, a misspelt
    ``RECKON_WATERMARK_BOUND_BY_SORCE`` would leave the stream on the default bound and
    record that in the warehouse's spec.

    >>> try:
    ...     _refuse_misspelt_env({"RECKON_IDLE_TIMOUT": "5m"}, {"idle_timeout"})
    ... except ConfigError as exc:
    ...     print(exc)
    RECKON_IDLE_TIMOUT is not a setting: did you mean RECKON_IDLE_TIMEOUT? (rename or unset it)
    """
    known = {"RECKON_" + n.upper() for n in names}
    for var in sorted(env):
        if var.startswith("RECKON_") and var not in known and var not in _NOT_SETTINGS:
            near = nearest(var.removeprefix("RECKON_").lower(), setting_names(),
                            lambda n: "RECKON_" + n.upper())
            raise ConfigError(f"{var} is not a setting{near} (rename or unset it)"
                              if near.startswith(":") else
                              f"{var} is not a setting (rename or unset it){near}")
