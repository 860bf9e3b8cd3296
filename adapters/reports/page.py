"""The inspector page: the template with its CSS, script and data inlined into one self-contained file."""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from string import Template

import msgspec
from contextledger.adapters.reports.report_model import ReportData

__all__ = ["content_security_policy", "embed_json", "render_page"]

_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
"""JSON string escapes that keep embedded data inert inside a script element (``</script>``, ``<!--``)."""


def embed_json(value: object) -> str:
    r"""Return ``value`` as JSON safe to place inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` occur in JSON only inside strings, where their ``\uXXXX`` escapes mean
    the same text: no ``</script>`` or ``<!--`` can end or bend the element, and U+2028/U+2029
    (line terminators to older JavaScript parsers) are escaped too.
    """
    text = msgspec.json.encode(value).decode()
    for raw, escaped in _ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def content_security_policy(script: str, style: str) -> str:
    """Return a policy that runs only ``script``, applies only ``style`` and lets nothing leave the page."""
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src {_sha256(script)}",
            f"style-src {_sha256(style)}",
            "img-src data:",
            "font-src 'none'",
            "connect-src 'none'",
            "media-src 'none'",
            "object-src 'none'",
            "frame-src 'none'",
            "worker-src 'none'",
            "manifest-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
        )
    )


def _asset(name: str) -> str:
    return resources.files("contextledger.adapters.reports").joinpath(name).read_text(encoding="utf-8")


def render_page(data: ReportData) -> str:
    """Return the inspector page of ``data``: one HTML file that needs no network and runs no logged text."""
    script = _asset("inspector.js")
    style = _asset("inspector.css")
    return Template(_asset("inspector.html")).substitute(
        csp=content_security_policy(script, style),
        style=style,
        script=script,
        data=embed_json(data),
    )
