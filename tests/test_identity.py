"""Names compared as the four-eyes rule must see them (reckon.identity)."""

from __future__ import annotations

import pytest

from reckon.identity import identity_key, same_person


@pytest.mark.parametrize("disguise", [
    "r\u043e\u043et",               # Cyrillic o
    "\uff52\uff4f\uff4f\uff54",     # fullwidth
    "ro\u200bot",                   # zero-width space
    "ROOT",                         # case
    " root\u00a0",                  # spaces, a no-break space
    "R\u039f\u039fT",               # Greek capital omicrons
    "r\u2060oot",                   # word joiner
])
def test_a_disguised_name_is_the_same_person(disguise: str) -> None:
    assert same_person("root", disguise)


@pytest.mark.parametrize(("a", "b"), [("alice", "bob"), ("alice", "alicia"), ("tom", "rom"),
                                      ("ann", "anna"), ("erin", "frank"), ("trent", "trend")])
def test_different_names_stay_different(a: str, b: str) -> None:
    assert not same_person(a, b)


def test_the_key_is_stable_and_visible() -> None:
    assert identity_key("Dave") == identity_key("dave") == "dave"
    assert identity_key("") == ""
