# sleuth's far-end helper part. Sent as text at the head of the prelude (probes/far/__init__.py,
# `program("prelude")`), so every probe finds these names in its namespace beside emit and
# params; a probe script run standalone reads this file from beside its folder instead. Standard
# library only; it must run on any Python 3.8+ at the far end. Also imported by sleuth itself
# (sleuth.probes.far.common): sessions/redact.py takes its secret-name rule from here, so the far
# end and the store redact by one rule.
import json as _json
import os as _os
import re as _re

# A secret's name holds a credential word as a word of its own (HF_TOKEN, hfToken, DB_PASSWORD,
# AWS_SECRET_ACCESS_KEY, oauth) or at a word's end (GITHUBTOKEN): never inside another word, so
# the package "tokenizers", TOKENIZERS_PARALLELISM or "author" are not secrets (issue 42: the
# package's version stored as <redacted> read as version drift on every state read).
SECRET_NAME = _re.compile(
    r"(?:^|[^a-z0-9])[a-z0-9]*(?:token|secret|secrets|password|passwd|passphrase|apikey|api_key|api-key|accesskey|"
    r"access_key|access-key|privatekey|private_key|private-key|credential|credentials|auth|authorization|"
    r"sessionkey|session_key|cookie|cookies)(?:$|[^a-z0-9])"
)
_CAMEL = _re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def secret_name(name):
    """Whether *name* (an environment variable, a mapping key) names a credential."""
    return bool(SECRET_NAME.search(_CAMEL.sub("_", name).lower()))


def cache_folder(*parts):
    """sleuth's cache at the far end: $XDG_CACHE_HOME/sleuth (default ~/.cache/sleuth), joined with *parts*."""
    cache = _os.environ.get("XDG_CACHE_HOME") or _os.path.join(_os.path.expanduser("~"), ".cache")
    return _os.path.join(cache, "sleuth", *parts)


def canonical(name):
    """A distribution's name as PEP 503 compares it: runs of -, _ and . as one -, lower case."""
    return _re.sub(r"[-_.]+", "-", name).lower()


def install_time(folder, dist):
    """When the package in *folder* was installed: the change time of its dist-info RECORD,
    which every installer writes itself (uv and conda hard-link the package's files from their
    caches, so a file's mtime is the wheel's, and a link's ctime is when it was made). A source
    tree without dist-info: the newest ctime of its __init__.py/version.py."""
    site = _os.path.dirname(folder)
    key = canonical(dist)
    times = []
    try:
        names = _os.listdir(site)
    except OSError:
        names = []
    for name in names:
        if name.endswith(".dist-info") and canonical(name.split("-")[0]) == key:
            try:
                times.append(_os.stat(_os.path.join(site, name, "RECORD")).st_ctime)
            except OSError:
                pass
    for name in ("__init__.py", "version.py") if not times else ():
        try:
            times.append(_os.stat(_os.path.join(folder, name)).st_ctime)
        except OSError:
            pass
    return max(times) if times else None


def emit(kind, **fields):
    """The stand-in for the prelude's emit where no prelude ran (a probe script run standalone):
    each record a JSON line on stdout."""
    print(_json.dumps(dict({"kind": kind}, **fields), default=str))


def run_parts(script, parts, namespace):
    """A probe script run standalone (no prelude) runs its parts itself, as sleuth sends them
    first at the far end: each file beside *script*, in *namespace*, under its own name."""
    for part in parts:
        path = _os.path.join(_os.path.dirname(_os.path.abspath(script)), part)
        with open(path) as fh:
            exec(compile(fh.read(), path, "exec"), namespace)
