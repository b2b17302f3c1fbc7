"""Between sleuth's own processes on this machine: the broker's Unix sockets (unixsock.py).

The lowest layer: the standard library only, and nothing of sleuth, because a command asks
the broker (app/quick.py) before the rest of sleuth is imported; probes/broker*.py use the
same paths and checks (tests/unit/test_layers.py holds both rules). Importing this package
imports nothing.
"""
