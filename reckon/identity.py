"""Whether two names are the same person's, as a four-eyes rule must see it.

A reviewer who wants to sign their own run types their name so that it looks the same and
compares different: "r<Cyrillic o><Cyrillic o>t", "root" in fullwidth letters,
"ro<zero-width space>ot". So
names are compared by a key: Unicode NFKC (fullwidth and compatibility forms to their plain
letters), case-folded, without white space, separators, control or invisible format
characters, and with every character replaced by one representative of its confusable class.
The classes come from Unicode's confusables data (UTS #39) as the maintained
``confusable_homoglyphs`` package ships it: characters it lists as homoglyphs of each other
are one class. That data pairs digits with capitals ("0" with "O", "1" with "l", "I" and
"|"), and a key made after case-folding would lose them ("r00t" signed "root"'s run), so the
digit/letter look-alikes are folded exactly as follows, and nothing else:

- ``0``, ``O``, ``o`` (and their confusables) are one letter: "r00t", "R0OT" are "root";
- ``1``, ``l``, ``|`` and capital ``I`` are one letter: "a1ice", "aIice" are "alice";
  small ``i`` stays itself ("ian" and "lan" differ; "Ian" and "lan" do not);
- no other digit folds: ``5``/``s``, ``2``/``z``, ``8``/``B`` and ``rn``/``m`` are not
  confusables in UTS #39's single-character data, so "5am" and "sam" stay two people.

A name is compared twice: case-folded first (so "ALICE" is "alice"), and with each
character's look-alike class taken before case-folding (so a capital I is an l). Two names
are one person when either key matches. Refusing a sign-off between near-identical names is
the safe side of the rule; "bob" and "rob" stay different.

Example:
    >>> same_person("root", "r\\u043e\\u043et")   # Cyrillic o
    True
    >>> same_person("root", "r00t"), same_person("lan", "Ian"), same_person("bob", "rob")
    (True, True, False)
"""

from __future__ import annotations

import json
import unicodedata
from functools import cache
from importlib import resources

__all__ = ["identity_key", "same_person", "shape_key"]

_INVISIBLE = ("Cc", "Cf", "Zs", "Zl", "Zp")
_DIGIT_O = str.maketrans({"0": "o"})  # the class of "0" and "O" is the class of "o"


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
    """The key two names of one person share, case-folded first (see the module docstring).

    >>> identity_key("R00T"), identity_key("alice")
    ('root', 'a1ice')
    """
    text = unicodedata.normalize("NFKC", name).casefold()
    visible = "".join(c for c in text
                      if not c.isspace() and unicodedata.category(c) not in _INVISIBLE)
    reps = _representatives()
    # the classes are built case by case (folding inside them would chain unrelated letters
    # together, "t" with "r"); a capital's look-alike folds to a small one's, so: fold, map,
    # fold, map
    once = "".join(reps.get(c, c) for c in visible).casefold()
    return "".join(reps.get(c, c) for c in once).translate(_DIGIT_O)


def shape_key(name: str) -> str:
    """The key of ``name`` with each character's look-alike class taken before case-folding:
    a capital I is an l here, as it looks.

    >>> shape_key("Ian") == shape_key("lan") != shape_key("ian")
    True
    """
    reps = _representatives()
    return identity_key("".join(reps.get(c, c)
                                for c in unicodedata.normalize("NFKC", name)))


def same_person(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` could be the same name dressed differently: either key of
    the module docstring matches."""
    return identity_key(a) == identity_key(b) or shape_key(a) == shape_key(b)
