"""Keeping secrets out of the store and every export.

A secret is the value of an environment variable whose name looks like a credential
(``HF_TOKEN``, ``WANDB_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD`` …), or a string
shaped like a well-known token (Hugging Face ``hf_…``, GitHub ``ghp_…``, OpenAI ``sk-…``,
AWS ``AKIA…``, private key blocks). Values are replaced by ``<redacted:NAME>`` before they
are written, in events and in captured output alike.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..probes.far.common import SECRET_NAME, secret_name

__all__ = ["Redactor", "contains", "is_secret_name", "SECRET_NAME"]

# A secret's name holds a credential word as a word of its own (HF_TOKEN, hfToken, DB_PASSWORD)
# or at a word's end (GITHUBTOKEN), never inside another ("tokenizers", TOKENIZERS_PARALLELISM):
# one rule, written in the far end's helper part, which the probes that read the environment at
# the far end (target-check, env-fingerprint) are sent with.
# Mappings whose keys are names of things, not of settings: a distribution named "google-auth"
# is a package, its version no secret (values are still redacted by value and shape).
_NAMED_MAPS = frozenset({"distributions"})
# Each shape is a literal start and what must follow it. The alternation of them all is the
# definition (leftmost match first, as re.sub finds it); one regex per start is how it runs:
# a regex with a literal start skips to it fast, where the alternation tries every position
# that begins with h, g, s, A or - (output full of "task-"/"disk-" redacted at 85 MB/s; the
# "sk-" shape alone at ~690).
_SHAPE_PARTS = (
    (b"hf_", rb"[A-Za-z0-9]{20,}"),
    (b"ghp_", rb"[A-Za-z0-9]{20,}"),
    (b"github_pat_", rb"[A-Za-z0-9_]{20,}"),
    (b"sk-", rb"[A-Za-z0-9_-]{20,}"),
    (b"AKIA", rb"[0-9A-Z]{16}"),
    (b"-----BEGIN ", rb"[A-Z ]*PRIVATE KEY-----"),
)
_SHAPES = tuple((start, re.compile(re.escape(start) + rest)) for start, rest in _SHAPE_PARTS)
_TOKEN_SHAPES = re.compile(b"(" + b"|".join(shape.pattern for _start, shape in _SHAPES) + b")")
# Literal starts of the shapes above: the regex only runs on data holding one of them, so
# plain output (the usual case) costs one memory search per prefix. Each prefix is a pass
# over every byte of output, so the list stays short: the tokens an ML engineer's
# environment holds (Hugging Face, GitHub, OpenAI-style, AWS, SSH keys).
_TOKEN_PREFIXES = tuple(start for start, _rest in _SHAPE_PARTS)
# From this size on, the searches go to the C library's memmem through ctypes, which lets
# go of the GIL meanwhile: capture redacts in its writer thread while the event loop goes on
# decrypting the transport. Python's own ``in`` holds the GIL for the whole pass (six of
# them ≈ 300 MB/s here, serialised with asyncssh: capture 83 MB/s, 0.37× raw ssh; with
# memmem and the writer's batching 105–145 MB/s, 0.60–0.74× on this noisy 2-core VM,
# bench/probe_latency.py). Smaller data stays with ``in`` (no call overhead).
_MEMMEM_FROM = 1 << 16
# Credentials in a URL's userinfo (https://user:token@pypi.corp/simple, an --index-url): the
# user and password are replaced, the scheme and host kept, as pip itself shows them.
# Searched only where "://" is in the data (one more pass over output).
_URL_CREDENTIALS = re.compile(rb"(?<=://)[^\s/@:'\"<>]+:[^\s/@'\"<>]+(?=@)")
_TOKEN_CHARS = re.compile(rb"[A-Za-z0-9_\-+/=.:@%~]*\Z")  # : @ % ~: a URL's userinfo is held whole
_MIN_SECRET = 6  # shorter values ("1", "true") would redact half the output


@functools.cache
def _memmem() -> Callable[[bytes, int, bytes, int], int | None] | None:
    """libc's memmem (glibc, musl and macOS have it), or None where ctypes cannot reach it."""
    try:
        import ctypes

        fn = ctypes.CDLL(None).memmem
    except (ImportError, OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    return fn


def contains(data: bytes, needle: bytes) -> bool:
    """``needle in data``; for large *bytes*, without holding the GIL during the search."""
    if len(data) >= _MEMMEM_FROM and type(data) is bytes and needle:
        fn = _memmem()
        if fn is not None:
            return fn(data, len(data), needle, len(needle)) is not None
    return needle in data


def _replace_shapes(data: bytes, present: list[re.Pattern[bytes]]) -> bytes:
    """``_TOKEN_SHAPES.sub(b"<redacted>", data)``, by the shapes whose start is in *data*.

    One shape: its own regex gives the same matches (no other can match). Several: their
    matches, if none overlaps another, are exactly the alternation's (each position can begin
    only one shape, so the leftmost match is the one found there); where two overlap, the
    alternation itself decides, as it always did."""
    if len(present) == 1:
        return present[0].sub(b"<redacted>", data)
    spans = sorted(m.span() for shape in present for m in shape.finditer(data))
    if any(spans[i][1] > spans[i + 1][0] for i in range(len(spans) - 1)):
        return _TOKEN_SHAPES.sub(b"<redacted>", data)
    out, at = [], 0
    for start, end in spans:
        out += (data[at:start], b"<redacted>")
        at = end
    out.append(data[at:])
    return b"".join(out)


@functools.lru_cache(maxsize=4096)  # the same keys come back in every event (state, records)
def is_secret_name(name: str) -> bool:
    """A credential's name: HF_TOKEN, hfToken, WANDB_API_KEY, x-auth-token — not tokenizers."""
    return secret_name(name)


_CONTAINERS = (dict, list, tuple)


class Redactor:
    """Replaces known secret values and token-shaped strings in text, bytes and data."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        self._values: dict[bytes, bytes] = {}
        self.add(secrets or {})

    @classmethod
    def from_environ(cls, *extra: Mapping[str, str]) -> Redactor:
        red = cls(os.environ)
        for env in extra:
            red.add(env)
        return red

    def add(self, env: Mapping[str, str]) -> None:
        for name, value in env.items():
            if is_secret_name(name) and isinstance(value, str) and len(value) >= _MIN_SECRET:
                self._values[value.encode()] = f"<redacted:{name}>".encode()
        self._longest = max((len(v) for v in self._values), default=0)
        # Longest first, so a secret that contains another is replaced whole.
        self._ordered = sorted(self._values.items(), key=lambda kv: -len(kv[0]))

    @property
    def holdback(self) -> int:
        """How many trailing bytes a stream writer may hold so no secret is split."""
        return max(self._longest, 256)

    def finds_any(self, data: bytes) -> bool:
        """Whether redact_bytes could change *data*: a secret value or a token's start is in it."""
        return any(contains(data, value) for value, _label in self._ordered) or any(
            contains(data, prefix) for prefix in _TOKEN_PREFIXES
        ) or (contains(data, b"://") and _URL_CREDENTIALS.search(data) is not None)

    def redact_bytes(self, data: bytes) -> bytes:
        for value, label in self._ordered:
            if contains(data, value):
                data = data.replace(value, label)
        present = [shape for start, shape in _SHAPES if contains(data, start)]
        if present:
            data = _replace_shapes(data, present)
        if contains(data, b"://"):
            data = _URL_CREDENTIALS.sub(b"<redacted:url-credentials>", data)
        return data

    def redact_text(self, text: str) -> str:
        return self.redact_bytes(text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")

    def redact_keys(self, obj: Any) -> Any:
        """Only the secret-looking keys of mappings (values are left to redact_text)."""
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if type(v) is str:
                    out[k] = "<redacted>" if type(k) is str and is_secret_name(k) else v
                elif k in _NAMED_MAPS and isinstance(v, dict):
                    out[k] = {name: (self.redact_keys(x) if isinstance(x, _CONTAINERS) else x) for name, x in v.items()}
                else:
                    out[k] = self.redact_keys(v) if isinstance(v, _CONTAINERS) else v
            return out
        if isinstance(obj, (list, tuple)):
            return [self.redact_keys(v) if isinstance(v, _CONTAINERS) else v for v in obj]
        return obj

    def split_safe(self, buffer: bytes) -> int:
        """Where *buffer* may be cut so that no secret straddles the cut.

        The tail after the cut is a run of token characters that a secret could continue;
        the caller holds it back until more bytes arrive or the stream ends.
        """
        if buffer.endswith(b"\n"):
            return len(buffer)
        window = buffer[-self.holdback :]
        tail = _TOKEN_CHARS.search(window)
        held = len(window) - tail.start() if tail else 0
        return len(buffer) - held
