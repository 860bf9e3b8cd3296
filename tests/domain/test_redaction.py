"""The one redaction rule: no form of a known secret survives, whatever surrounds it, wherever it is cut."""

from __future__ import annotations

from urllib.parse import quote

from contextledger.domain.redaction import MIN_PARTIAL, REDACTED, redact, redact_then_cut
from hypothesis import assume, given
from hypothesis import strategies as st

KEY_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
secrets_ = st.text(KEY_CHARS, min_size=MIN_PARTIAL, max_size=80)
noise = st.text(st.characters(codec="utf-8"), max_size=60)


def _u_escaped(secret: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in secret)


def _forms(secret: str) -> list[str]:
    return [
        secret,
        _u_escaped(secret),
        "".join(f"%{ord(c):02X}" for c in secret),
        quote(secret, safe=""),
        secret[: MIN_PARTIAL + 1],
        secret[-MIN_PARTIAL:],
    ]


@given(secret=secrets_, before=noise, after=noise, form=st.integers(0, 5))
def test_no_form_of_the_secret_survives(secret, before, after, form):
    r"""Raw, \u-escaped, %-encoded, a head cut short or a tail: all replaced, the context kept."""
    assume(secret not in before + after)
    text = before + _forms(secret)[form] + after
    redacted = redact(text, [secret])
    assert REDACTED in redacted
    assert secret not in redacted
    for piece in redacted.split(REDACTED):
        assert not any(secret[i : i + MIN_PARTIAL] in piece for i in range(len(secret) - MIN_PARTIAL + 1)), (
            text,
            redacted,
        )


@given(secret=secrets_, before=noise, after=noise, limit=st.integers(0, 200))
def test_redact_then_cut_leaves_no_head_at_the_cut(secret, before, after, limit):
    """Wherever the cut falls, even through the key, no run of the key's characters is left before it."""
    text = before + secret + after
    cut = redact_then_cut(text, [secret], limit)
    assert len(cut) <= limit
    for piece in cut.split(REDACTED):
        for i in range(len(secret) - MIN_PARTIAL + 1):
            assert secret[i : i + MIN_PARTIAL] not in piece


@given(secret=secrets_, text=noise)
def test_text_without_the_secret_is_unchanged(secret, text):
    """A text sharing no run of MIN_PARTIAL characters (nor a masked form) with the secret is kept as is."""
    assume(not any(secret[i : i + MIN_PARTIAL] in text for i in range(len(secret) - MIN_PARTIAL + 1)))
    assume("*" not in text and ".." not in text and "\u2026" not in text and "\u2022" not in text)
    assume("\\" not in text and "%" not in text)
    assert redact(text, [secret]) == text


def test_the_providers_masked_forms_are_redacted():
    """OpenAI's "sk-proj-****abcd" and the "sk-...abcd" style: a head and the last characters of the key."""
    key = "sk-proj-Q2w3E4r5T6y7U8i9O0pAbCd"
    for shown in ("sk-proj-" + "*" * 20 + "AbCd", "sk-...AbCd", "sk-\u2026pAbCd", "****************pAbCd"):
        text = f"Incorrect API key provided: {shown}. You can find your key at ..."
        redacted = redact(text, [key])
        assert shown not in redacted, redacted
        assert redacted.startswith("Incorrect API key provided: [redacted].")


def test_a_short_secret_is_redacted_only_whole():
    """A secret shorter than MIN_PARTIAL is redacted where it appears whole; empty secrets are ignored."""
    assert redact("token k1 and k2", ["k1", ""]) == f"token {REDACTED} and k2"
    assert redact("nothing", []) == "nothing"


def test_json_escaped_slash_and_mixed_escapes():
    r"""A key with a slash echoed as JSON (\/) and partly \u-escaped is still one redacted run."""
    key = "ab/cd/ef/gh/ij"
    text = 'key "ab\\/cd\\/e\\u0066\\/gh\\/ij" refused'
    assert redact(text, [key]) == f'key "{REDACTED}" refused'


def test_a_character_that_looks_like_an_escape_does_not_hide_the_key_after_it():
    """'%00000000' decodes '%00' as one character; the raw key after the '%' is still redacted."""
    assert redact("%00000000", ["00000000"]) == "%" + REDACTED
    assert redact("url?k=%41bcdefghij", ["41bcdefghij"]) == "url?k=%" + REDACTED
