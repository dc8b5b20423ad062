"""Whether two names are the same person's, as a four-eyes rule must see it.

A reviewer who wants to sign their own run types their name so that it looks the same and
compares different: "r<Cyrillic o><Cyrillic o>t", "root" in fullwidth letters,
"ro<zero-width space>ot". So
names are compared by a key: Unicode NFKC (fullwidth and compatibility forms to their plain
letters), case-folded, without white space, separators, control or invisible format
characters, and with every character replaced by one representative of its confusable class.
The classes come from Unicode's confusables data (UTS #39) as the maintained
``confusable_homoglyphs`` package ships it: characters it lists as homoglyphs of each other
are one class (so "0" and "o", "l" and "1" fall together too: refusing a sign-off between
near-identical names is the safe side of the rule).

Example:
    >>> same_person("root", "r\\u043e\\u043et")   # Cyrillic o
    True
    >>> same_person("alice", "bob")
    False
"""

from __future__ import annotations

import json
import os
import pwd
import unicodedata
from functools import cache
from importlib import resources

__all__ = ["identity_key", "os_principal", "same_person"]

_INVISIBLE = ("Cc", "Cf", "Zs", "Zl", "Zp")


@cache
def _representatives() -> dict[str, str]:
    """Character -> the smallest character of its confusable class (single characters)."""
    data = json.loads(resources.files("confusable_homoglyphs")
                      .joinpath("confusables.json").read_text(encoding="utf-8"))
    parent: dict[str, str] = {}

    def root(c: str) -> str:
        while parent.get(c, c) != c:
            parent[c] = parent.get(parent[c], parent[c])
            c = parent[c]
        return c

    for char, glyphs in data.items():
        for glyph in glyphs:
            a, b = root(char), root(str(glyph["c"]))
            if len(a) == 1 and len(b) == 1 and a != b:
                parent[max(a, b)] = min(a, b)
    return {c: root(c) for c in list(parent)}


def identity_key(name: str) -> str:
    """The key two names of one person share (see the module docstring)."""
    text = unicodedata.normalize("NFKC", name).casefold()
    visible = "".join(c for c in text
                      if not c.isspace() and unicodedata.category(c) not in _INVISIBLE)
    reps = _representatives()
    # the classes are built case by case (folding inside them would chain unrelated letters
    # together, "t" with "r"); a capital's look-alike folds to a small one's, so: fold, map,
    # fold, map
    once = "".join(reps.get(c, c) for c in visible).casefold()
    return "".join(reps.get(c, c) for c in once)


def same_person(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` could be the same name dressed differently."""
    return identity_key(a) == identity_key(b)


def os_principal() -> str:
    """The account this process runs as, from the operating system (its effective uid), not
    from an environment variable anyone can set (``USER``, ``LOGNAME``): who an audit
    records as its reconciler and who a sign-off is made by."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # an account without a passwd entry (a container's arbitrary uid)
        return f"uid {uid}"
