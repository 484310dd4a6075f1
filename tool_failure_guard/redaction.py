"""Credentials in a URL never reach a message: one redaction for every host.

The ACP agent (its model endpoint's errors and every log line,
:mod:`tool_failure_guard.session.config.redact`) and the rollout analysis
(the ``--clickhouse`` URL in its messages) both use this module, which imports
nothing of either: plain functions on text, no IO.

What is masked in a URL (``scheme://authority/path?query#fragment``):

* the **user information**: everything in the authority up to its *last* ``@``
  (``http://user:p@ssw0rd@host`` -> ``http://***@host``: a password holding an
  unencoded ``@`` does not leak its tail). The authority ends at the first
  ``/``, ``?`` or ``#``, as every URL parser reads it;
* an authority that holds no ``@`` but a ``:`` followed by something that is not
  a port number (``http://user:pa/ss@host``: a password cut short by an
  unencoded ``/``, ``?`` or ``#``): the whole URL after ``scheme://`` is masked,
  since where the credentials end cannot be told;
* the value of every **credential-like parameter** in the query or the fragment
  (``?access_token=…``, ``#id_token=…``): a name in :data:`CREDENTIAL_PARAMETERS`
  or ending in one of :data:`CREDENTIAL_SUFFIXES` (compared in lower case, ``-``
  read as ``_`` and camelCase as snake_case: ``accessToken`` is ``access_token``)
  becomes ``name=***``.

In free text (:func:`redact_text`) a URL ends at whitespace or a quote, except
in its user information: ``http://user:pa'SECRET@host`` is one URL (a password
may hold a quote), and a password cut short by a quote and a raw ``/``, where
the authority cannot be split, is masked up to the next whitespace.

Everything else (host, port, path, other parameters) is kept, so a message
still says where it went.
"""

from __future__ import annotations

import re

#: Query/fragment parameter names whose value is a credential (lower case, ``_`` for ``-``).
CREDENTIAL_PARAMETERS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "auth",
        "authorization",
        "client_secret",
        "code",
        "credential",
        "credentials",
        "id_token",
        "key",
        "pass",
        "passwd",
        "password",
        "pwd",
        "refresh_token",
        "secret",
        "session_token",
        "sig",
        "signature",
        "token",
        "x_amz_credential",
        "x_amz_security_token",
        "x_amz_signature",
    }
)
#: A parameter whose name ends in one of these is a credential too (``private_token``).
CREDENTIAL_SUFFIXES = ("_token", "_key", "_secret", "_password", "_signature")

MASK = "***"

#: A URL in free text: a scheme, ``://``, user information up to the authority's last ``@``
#: (quotes included), and everything up to whitespace or a quote.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:[^\s/?#]*@)?[^\s\"'<>`]*")
_QUOTES = frozenset("\"'<>`")
_WHITESPACE = re.compile(r"\s")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PARAMETER = re.compile(r"(?P<lead>[?&;#])(?P<name>[^=&;#?\s]+)=(?P<value>[^&;#\s]*)")
_PORT = re.compile(r"[0-9]*")


def is_credential_parameter(name: str) -> bool:
    """Whether a query or fragment parameter called ``name`` carries a credential."""
    key = _CAMEL.sub("_", name).lower().replace("-", "_")
    return key in CREDENTIAL_PARAMETERS or key.endswith(CREDENTIAL_SUFFIXES)


def _mask_parameter(match: re.Match[str]) -> str:
    if not is_credential_parameter(match["name"]) or not match["value"]:
        return match[0]
    return f"{match['lead']}{match['name']}={MASK}"


def _authority_is_unsplittable(authority: str) -> bool:
    """``user:secret`` cut short by a raw ``/?#``: a ``:`` not followed by a port."""
    if authority.startswith("["):  # an IPv6 literal: its own colons
        _, _, rest = authority.partition("]")
        return bool(rest) and not (rest.startswith(":") and _PORT.fullmatch(rest[1:]))
    _, colon, port = authority.rpartition(":")
    return bool(colon) and not _PORT.fullmatch(port)


def redact_url(url: str) -> str:
    """``url`` with its credentials masked (see the module text for what is masked)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _PARAMETER.sub(_mask_parameter, url)
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = MASK + authority[authority.rindex("@") :]
    elif _authority_is_unsplittable(authority):
        return f"{scheme}://{MASK}"
    return f"{scheme}://{authority}{_PARAMETER.sub(_mask_parameter, tail)}"


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url`."""
    parts: list[str] = []
    position = 0
    while (match := _URL.search(text, position)) is not None:
        url = match[0]
        kept = url.rstrip(".,;:!?)]}")  # the sentence's punctuation, not the URL's
        shown = redact_url(kept)
        parts.append(text[position : match.start()])
        position = match.end()
        cut_by_quote = position < len(text) and text[position] in _QUOTES
        if cut_by_quote and shown.endswith(f"://{MASK}"):  # the password went on past the quote
            space = _WHITESPACE.search(text, position)
            position = len(text) if space is None else space.start()
            parts.append(shown)
        else:
            parts.append(shown + url[len(kept) :])
    parts.append(text[position:])
    return "".join(parts)
