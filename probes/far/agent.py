# sleuth's resident probe agent. Not imported: sleuth sends this text, length-prefixed, to a
# constant loader (`python -c "<BOOT>"`, probes/agent.py) through the target's hop chain, and
# then speaks frames with it over the same stdin/stdout. Standard library only, Python 3.8+,
# single-threaded (it forks).
#
# Frames, both ways: 4-byte big-endian length, 1 type byte, 4-byte run id, payload.
#   to the agent:   R run (JSON: program as latin-1 text, fork)   C cancel   H health
#                   W warm (JSON: modules to import, for forked runs)   Q quit
#   from the agent: V hello (JSON)   S started (JSON pid, how)   O stdout bytes   E stderr bytes
#                   X exit (JSON)   h health (JSON)   w warmed (JSON)
#                   F a request it could not carry out (JSON)
# A probe's own output travels inside O/E frames and can never be read as a frame.
#
# The agent ends, killing every child's process group, when its stdin reaches EOF or its
# stdout breaks (the connection went). Each child runs the prelude, whose watchdog kills the
# child's whole group when the reader of its stdout (this agent) goes, so nothing outlives
# the agent even if it is killed outright. (Not a parent-death signal: that would kill the
# child before its watchdog could take the grandchildren with it.)
import hashlib as _hashlib
import json as _json
import os as _os
import selectors as _selectors
import signal as _signal
import struct as _struct
import sys as _sys
import time as _time

_HEAD = _struct.Struct(">IBI")


def _agent_boot(source):
    _Agent(_hashlib.sha256(source).hexdigest()[:16]).serve()


class _Agent:
    """The agent's state: its children (run id -> pid, open pipes, how, started), their pipes
    (fd -> run id, stream letter), the frames not yet written, the modules warmed."""

    out_fd = 1
    in_fd = 0

    def __init__(self, source_hash):
        self.source_hash = source_hash
        self.children = {}  # run id -> dict(pid, open, how, started[, cancelled])
        self.fds = {}  # fd -> (run id, stream letter)
        self.sel = _selectors.DefaultSelector()
        self.started = _time.time()
        # Frames are written together: at a run's exit or an answer at once, output at most
        # 40 ms late (or at 64 KiB). Through a jump host every small write after an unacked one
        # waits for the next hop's delayed ACK (40 ms): a trivial probe took 48 ms, not 10.
        self.pending = []
        self.since = 0.0
        self.size = 0
        self.urgent = False
        self.warmed = []
        self.compiled = {}  # the program's unchanging head (the prelude) -> its code object
        self.buffer = bytearray()
        _os.set_blocking(self.in_fd, False)

    def send(self, kind, run, payload=None):
        if payload is None:
            payload = b""
        elif isinstance(payload, (dict, list)):
            payload = _json.dumps(payload).encode()
        if not self.pending:
            self.since = _time.time()
        self.pending.append(_HEAD.pack(len(payload) + 5, ord(kind), run) + payload)
        self.size += len(payload) + 9
        if kind not in "OES":
            self.urgent = True

    def flush(self, force=False):
        if not self.pending:
            return
        if not (force or self.urgent or self.size >= 65536 or _time.time() - self.since >= 0.04):
            return
        frame = b"".join(self.pending)
        del self.pending[:]
        self.size, self.urgent = 0, False
        view = memoryview(frame)
        while view:
            try:
                view = view[_os.write(self.out_fd, view):]
            except BlockingIOError:
                _time.sleep(0.01)
            except (BrokenPipeError, OSError):
                self.shutdown(3)

    def kill_all(self):
        for child in list(self.children.values()):
            try:
                _os.killpg(child["pid"], _signal.SIGKILL)
            except OSError:
                pass

    def shutdown(self, code):
        self.kill_all()
        try:
            if code == 0:
                self.flush(force=True)
        except Exception:
            pass
        _os._exit(code)

    def warm(self, modules):
        t = _time.time()
        failed = {}
        for name in modules:
            if name in self.warmed:
                continue
            try:
                module = __import__(name)
                if name == "platform":
                    module.platform()  # caches uname for every forked child
                elif name == "getpass":
                    try:
                        module.getuser()  # loads the passwd lookup (NSS) once: each state read asks
                    except Exception:
                        pass
                self.warmed.append(name)
            except Exception as exc:
                failed[name] = "%s: %s" % (type(exc).__name__, exc)
        return {"warm": self.warmed, "failed": failed, "seconds": round(_time.time() - t, 3)}

    def split(self, program):
        # Compile the prelude once, in the agent, so a forked child only compiles the last line.
        at = program.rfind(b"\n_sleuth_main(")
        if at < 0:
            return None, compile(program, "<stdin>", "exec")
        head = program[:at]
        key = _hashlib.sha256(head).digest()
        if key not in self.compiled:
            self.compiled[key] = compile(head, "<stdin>", "exec")
        return self.compiled[key], compile(b"\n" * head.count(b"\n") + program[at:], "<stdin>", "exec")

    def start(self, run, request):
        program = request["program"].encode("latin-1")
        want_fork = bool(request.get("fork")) and hasattr(_os, "fork")
        how = "fork" if want_fork and not _cuda_initialised() else "fresh"
        codes = self.split(program) if how == "fork" else None
        in_r, in_w = _os.pipe()
        out_r, out_w = _os.pipe()
        err_r, err_w = _os.pipe()
        pid = _os.fork()
        if pid == 0:  # the child: never returns
            try:
                _os.setsid()
                if request.get("cwd"):
                    _os.chdir(request["cwd"])  # a local target: where the command was given
                if request.get("env") is not None:  # ... and its environment
                    _os.environ.clear()
                    _os.environ.update(request["env"])
                try:
                    self.sel.close()  # the agent's epoll fd
                except Exception:
                    pass
                _os.dup2(in_r, 0)
                _os.dup2(out_w, 1)
                _os.dup2(err_w, 2)
                for fd in (in_r, in_w, out_r, out_w, err_r, err_w, *self.fds):  # other runs' pipes too
                    try:
                        _os.close(fd)
                    except OSError:
                        pass
                if how == "fresh":
                    _os.execv(_sys.executable, [_sys.executable, "-"])
                _os._exit(_run_forked(codes))
            except BaseException:
                _os._exit(127)
        for fd in (in_r, out_w, err_w):
            _os.close(fd)
        if how == "fresh":
            # the program goes on the fresh interpreter's stdin, as `python -` wants it
            view = memoryview(program)
            while view:
                try:
                    view = view[_os.write(in_w, view):]
                except BrokenPipeError:
                    break
        _os.close(in_w)
        for fd, letter in ((out_r, "O"), (err_r, "E")):
            _os.set_blocking(fd, False)
            self.fds[fd] = (run, letter)
            self.sel.register(fd, _selectors.EVENT_READ, "child")
        self.children[run] = {"pid": pid, "open": 2, "how": how, "started": _time.time()}
        self.send("S", run, {"pid": pid, "how": how})

    def reap(self, run):
        child = self.children.get(run)
        if child is None or child["open"]:
            return
        _, status = _os.waitpid(child["pid"], 0)
        del self.children[run]
        info = {"seconds": round(_time.time() - child["started"], 6), "how": child["how"]}
        if _os.WIFSIGNALED(status):
            info["signal"] = _signal.Signals(_os.WTERMSIG(status)).name
        else:
            info["exit_status"] = _os.WEXITSTATUS(status)
        if child.get("cancelled"):
            info["cancelled"] = True
        self.send("X", run, info)

    def health(self):
        return {
            "pid": _os.getpid(),
            "version": self.source_hash,
            "uptime": round(_time.time() - self.started, 3),
            "python": _sys.version.split()[0],
            "executable": _sys.executable,
            "warm": self.warmed,
            "children": {str(r): {"pid": c["pid"], "how": c["how"]} for r, c in self.children.items()},
            "load": list(_os.getloadavg()) if hasattr(_os, "getloadavg") else None,
        }

    def handle(self, kind, run, payload):
        if kind == "R":
            if run in self.children:
                self.send("F", run, {"error": "run %d is already going" % run})
                return
            try:
                self.start(run, _json.loads(payload.decode()))
            except Exception as exc:
                self.send("F", run, {"error": "could not start the probe: %s" % exc})
        elif kind == "C":
            child = self.children.get(run)
            if child is not None:
                child["cancelled"] = True
                try:
                    _os.killpg(child["pid"], _signal.SIGKILL)
                except OSError:
                    pass
        elif kind == "H":
            self.send("h", run, self.health())
        elif kind == "W":
            self.send("w", run, self.warm(_json.loads(payload.decode()).get("modules", [])))
        elif kind == "Q":
            self.shutdown(0)
        # "K" (and any kind this agent does not know) is ignored: the host sends K as output
        # arrives, so each hop has data going our way to carry its ACK (probes/agent.py)

    def read_control(self, fd):
        try:
            data = _os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            self.shutdown(0)  # our stdin is gone: the client or its connection went
        buffer = self.buffer
        buffer.extend(data)
        while len(buffer) >= 4:
            (length,) = _struct.unpack(">I", bytes(buffer[:4]))
            if len(buffer) < 4 + length:
                break
            kind, run = chr(buffer[4]), _struct.unpack(">I", bytes(buffer[5:9]))[0]
            payload = bytes(buffer[9 : 4 + length])
            del buffer[: 4 + length]
            self.handle(kind, run, payload)

    def read_child(self, fd):
        run, letter = self.fds[fd]
        try:
            data = _os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if data:
            self.send(letter, run, data)
            return
        self.sel.unregister(fd)
        _os.close(fd)
        del self.fds[fd]
        self.children[run]["open"] -= 1
        self.reap(run)

    def serve(self):
        self.sel.register(self.in_fd, _selectors.EVENT_READ, "control")
        _signal.signal(_signal.SIGHUP, lambda *a: self.shutdown(129))
        _signal.signal(_signal.SIGTERM, lambda *a: self.shutdown(143))
        self.send("V", 0, self.health())
        self.flush()
        while True:
            self.flush()
            for key, _ in self.sel.select(0.04 if self.pending else 1.0):
                if key.data == "control":
                    self.read_control(key.fd)
                else:
                    self.read_child(key.fd)


def _cuda_initialised():
    torch = _sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:
        return True  # cannot tell: do not fork


def _run_forked(codes):
    """In a child forked from the agent: run the program here, with what the agent imported
    already loaded; its exit status."""
    _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    _sys.stdin = open(0, "r", closefd=False)
    _sys.stdout = open(1, "w", buffering=1, closefd=False)
    _sys.stderr = open(2, "w", buffering=1, closefd=False)
    _sys.argv = ["-"]
    code = 0
    try:
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        for code_object in codes or ():
            if code_object is not None:
                exec(code_object, namespace)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    return code
