"""kuota.api.semver: semantic versions as DRA reads them (attribute values, CEL's semver())."""

from __future__ import annotations

import pytest

from kuota.api.semver import parse_semver

SEMVER_CASES = [
    ("1.2.3", (1, 2, 3, ())),
    ("1.2.3-rc.1+b", (1, 2, 3, ("rc", "1"))),
    ("01.2.3", None),
    ("1.2", None),
    ("v1.2.3", None),
    ("1.2.3-", None),
]


@pytest.mark.parametrize(("text", "want"), SEMVER_CASES)
def test_parse_semver(text: str, want: object) -> None:
    assert parse_semver(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("v1.2.3", (1, 2, 3, ())),  # a leading v
        ("1", (1, 0, 0, ())),  # minor and patch missing
        ("1.2", (1, 2, 0, ())),
        ("01.02.003", (1, 2, 3, ())),  # leading zeros
        ("v2.0-beta.1+build", (2, 0, 0, ("beta", "1"))),
        ("1.2.3.4", None),  # four parts is never a version
        ("v", None),
        ("1.x", None),
        ("1.\u0662.3", None),  # a non-ASCII digit
    ],
)
def test_normalize_accepts_what_kubernetes_semver_true_accepts(text: str, want: object) -> None:
    assert parse_semver(text, normalize=True) == want


def test_build_metadata_is_dropped_and_pre_release_identifiers_kept_in_order() -> None:
    assert parse_semver("1.0.0-alpha.10.b+exp.sha.5114f85") == (1, 0, 0, ("alpha", "10", "b"))
    assert parse_semver("1.0.0+20130313144700") == (1, 0, 0, ())


@pytest.mark.parametrize("text", ["1.0.0-01", "1.0.0-alpha..1", "1.0.0+", " 1.0.0", "1.0.0 "])
def test_malformed_pre_release_build_or_spaces_are_not_versions(text: str) -> None:
    assert parse_semver(text) is None


def test_a_non_string_or_an_overlong_text_is_not_a_version() -> None:
    assert parse_semver(123) is None  # type: ignore[arg-type]
    assert parse_semver("1.0.0-" + "a" * 251) is None  # 257 characters
    assert parse_semver("1.0.0-" + "a" * 250) == (1, 0, 0, ("a" * 250,))  # 256
