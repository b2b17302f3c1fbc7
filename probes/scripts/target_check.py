# pyright: reportPossiblyUnboundVariable=false
# (emit, params and secret_name come from the prelude sleuth sends first; run standalone, emit and
# secret_name come from probes/far/common.py)
"""What the far end sees: argv, environment (secrets redacted), user, host, cwd, interpreter."""

PROBE = {
    "fork": True,  # reads state only: safe to fork from a warm agent
    "id": "target-check",
    "title": "round-trip argv and environment through every hop",
    "timeout": 30,
    "cost": 0.2,
    "reports": ["argv", "env", "user", "host", "cwd", "executable", "prefix", "container"],
}

if "emit" not in globals():  # run standalone: emit (JSON lines on stdout) from the far end's helper part
    import os
    import runpy

    _far = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "far", "common.py"))
    emit, secret_name = _far["emit"], _far["secret_name"]
    params = {}

import getpass
import os
import socket
import sys


def container_hint():
    if os.environ.get("container"):
        return os.environ["container"]
    if os.path.exists("/.dockerenv"):
        return "docker"
    try:
        with open("/proc/1/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"container="):
                    return item.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return None


emit(
    "result",
    argv=sys.argv,
    env={k: ("<redacted>" if secret_name(k) else v) for k, v in sorted(os.environ.items())},  # sessions/redact.py's rule
    user=getpass.getuser(),
    uid=os.getuid(),
    host=socket.gethostname(),
    cwd=os.getcwd(),
    executable=sys.executable,
    prefix=sys.prefix,
    in_venv=sys.prefix != getattr(sys, "base_prefix", sys.prefix),
    python=sys.version.split()[0],
    pid=os.getpid(),
    container=container_hint(),
    echo=params.get("echo"),
)
