# pyright: reportPossiblyUnboundVariable=false
# (emit and params come from the prelude sleuth sends first; run standalone, the file defines them)
"""What the far end sees: argv, environment (secrets redacted), user, host, cwd, interpreter."""

PROBE = {
    "fork": True,  # reads state only: safe to fork from a warm agent
    "id": "target-check",
    "title": "round-trip argv and environment through every hop",
    "timeout": 30,
    "cost": 0.2,
    "reports": ["argv", "env", "user", "host", "cwd", "executable", "prefix", "container"],
}

if "emit" not in globals():  # run standalone: records as JSON lines on stdout
    import json

    def emit(kind, **fields):
        print(json.dumps({"kind": kind, **fields}, default=str))

    params = {}

import getpass
import os
import re
import socket
import sys

# a credential word as a word of the name (HF_TOKEN, WANDB_API_KEY), never inside one
# (TOKENIZERS_PARALLELISM is no secret): sessions/redact.py's rule, said again at the far end
SECRET = re.compile(
    r"(?:^|[^A-Z0-9])[A-Z0-9]*(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|"
    r"CREDENTIALS?|AUTH|AUTHORIZATION|COOKIE)(?:$|[^A-Z0-9])", re.I)


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
    env={k: ("<redacted>" if SECRET.search(k) else v) for k, v in sorted(os.environ.items())},
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
