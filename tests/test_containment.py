"""Containment of replay workers, checked on real child processes (no mocks).

Each child loads the containment module by path (``pytest_r3.replay``'s package imports numpy,
which starts OpenBLAS threads before ``enter()`` could run), enters, seals, then does one
thing: forbidden things must end it with SIGSYS (never hang: every child has a timeout),
allowed work must go on as usual.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_r3.backends import clang as toolchain
from pytest_r3.replay import containment

MODULE = Path(containment.__file__)
LINUX = sys.platform.startswith("linux") and os.uname().machine in containment.ARCHES
ARCH = containment.ARCHES.get(os.uname().machine, (0,))[0]  # column of SYSCALLS
CLONE = containment.SYSCALLS["clone"][ARCH]
pytestmark = pytest.mark.skipif(not LINUX, reason="containment is Linux x86_64/aarch64 only")

PRELUDE = f"""\
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("r3_containment", {str(MODULE)!r})
containment = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = containment
spec.loader.exec_module(containment)
"""


def run_child(body: str, *, seal: bool = True, writable=(), before_seal: str = "",
              env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """A fresh interpreter that enters containment, runs ``before_seal``, seals, runs ``body``;
    ``report`` (the Containment) is in scope throughout."""
    script = "\n".join([
        PRELUDE,
        f"report = containment.enter(writable_dirs={[str(w) for w in writable]!r})",
        textwrap.dedent(before_seal),
        "containment.seal(report)" if seal else "",
        "print('REPORT', report.as_dict(), flush=True)",
        textwrap.dedent(body),
    ])
    child_env = {k: v for k, v in os.environ.items() if k != containment.ENV}
    child_env.update(env or {})
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout, env=child_env)


def report_of(result: subprocess.CompletedProcess) -> dict:
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT "))
    return eval(line[len("REPORT "):], {})  # a dict of lists of strings, from our own child


@pytest.fixture(scope="module")
def probe() -> dict:
    """What this kernel gives a contained, sealed child (the skips below rest on it)."""
    result = run_child("")
    assert result.returncode == 0, result.stderr
    return report_of(result)


def applied(probe: dict, step: str) -> bool:
    return any(entry.startswith(step) for entry in probe["applied"])


def require(probe: dict, step: str) -> None:
    if not applied(probe, step):
        pytest.skip(f"{step} not available here: {'; '.join(probe['degraded'])}")


AXPY = "void axpy(long n, float a, const float *x, float *y)\n" \
       "{ for (long i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"


def test_allowed_work_keeps_working_after_seal(tmp_path, probe):
    require(probe, "seccomp")
    ir = tmp_path / "axpy.ll"
    ir.write_text(toolchain.compile_to_ir(
        AXPY, filename="axpy.c", target_flags=toolchain.host_target().clang_flags()))
    before_seal = f"""
        import ctypes, resource, signal, threading, time, traceback
        from multiprocessing.connection import Pipe
        import numpy as np
        import numpy.random  # numpy imports it lazily: nothing can be imported once sealed
        import llvmlite.binding as llvm
        from pytest_r3.backends import clang as toolchain
        from pytest_r3.model.pipeline import Pipeline
        ir = open({str(ir)!r}).read()
        reader, writer = Pipe(duplex=False)
        target = toolchain.host_target()
        toolchain.initialize_llvm()
    """
    body = """
        a = np.random.default_rng(0).random((300, 300))
        assert np.allclose((a @ a)[0, 0], a[0] @ a[:, 0])
        module = toolchain.parse_ir(ir, "axpy")
        machine = llvm.Target.from_triple(target.triple).create_target_machine(
            cpu=target.cpu, features=target.features, opt=3, codemodel="jitdefault", jit=True)
        Pipeline().run(module, machine)
        engine = llvm.create_mcjit_compiler(module, machine)
        engine.finalize_object()
        axpy = ctypes.CFUNCTYPE(None, ctypes.c_long, ctypes.c_float, ctypes.c_void_p,
                                ctypes.c_void_p)(engine.get_function_address("axpy"))
        x, y = np.ones(1000, np.float32), np.zeros(1000, np.float32)
        axpy(1000, 2.0, x.ctypes.data, y.ctypes.data)
        assert (y == 2.0).all()
        callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda v: v + 1)
        assert callback(1) == 2
        results = []
        thread = threading.Thread(target=lambda: results.append(float((a @ a).sum())))
        thread.start(); thread.join()
        assert results
        try:
            1 / 0
        except ZeroDivisionError:
            assert "ZeroDivisionError" in traceback.format_exc()
        fired = []
        signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        time.sleep(0.1)
        assert fired
        writer.send_bytes(b"hello")
        assert reader.poll(5) and reader.recv_bytes() == b"hello"
        resource.getrlimit(resource.RLIMIT_AS)
        os.kill(os.getpid(), 0)
        print("done")
    """
    result = run_child(body, before_seal=before_seal)
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout


FORBIDDEN = {
    "fork": "libc.fork()",
    "clone_without_thread": f"libc.syscall({CLONE}, signal.SIGCHLD, 0, 0, 0, 0)",
    "exec": "os.execv('/bin/true', ['true'])",
    "socket": "socket.socket(socket.AF_INET, socket.SOCK_STREAM)",
    "connect_loopback": "socket.socket().connect(('127.0.0.1', PORT))",
    "unix_socketpair": "socket.socketpair()",
    "open_for_write": "os.open(TARGET, os.O_WRONLY | os.O_CREAT, 0o644)",
    "open_for_append": "open(TARGET, 'a')",
    "open_for_read": "open(TARGET)",
    "ptrace": "libc.ptrace(0, 0, 0, 0)",  # PTRACE_TRACEME
    "kill_parent": "os.kill(os.getppid(), 0)",
    "memfd": "os.memfd_create('x')",
    "unshare": "libc.unshare(0x40000000)",
    "unlink": "os.unlink(TARGET)",
    "mkdir": "os.mkdir(TARGET + '.d')",
}
if os.uname().machine == "x86_64":
    FORBIDDEN["x32_syscall"] = "libc.syscall(0x40000000 | 39)"


@pytest.mark.parametrize("action", sorted(FORBIDDEN))
def test_forbidden_system_calls_kill_the_worker_with_sigsys(action, tmp_path, probe):
    require(probe, "seccomp")
    target = tmp_path / "target.txt"
    if action in ("unlink", "open_for_read"):
        target.write_text("keep me")
    listener = socket.create_server(("127.0.0.1", 0))
    before_seal = f"""
        import ctypes, signal, socket
        libc = ctypes.CDLL(None, use_errno=True)
        TARGET, PORT = {str(target)!r}, {listener.getsockname()[1]}
    """
    # tmp_path is writable under Landlock here: seccomp alone must stop the write
    with listener:
        result = run_child(FORBIDDEN[action] + "\nprint('survived')", writable=[tmp_path],
                           before_seal=before_seal)
    assert result.returncode == -signal.SIGSYS, (result.returncode, result.stderr)
    assert containment.is_sandbox_violation(result.returncode)
    assert "survived" not in result.stdout
    assert target.exists() == (action in ("unlink", "open_for_read"))
    assert not (tmp_path / "target.txt.d").exists()


def test_harmless_refusals_are_errors_not_kills(probe):
    require(probe, "seccomp")
    body = """
        import ctypes, errno, resource
        libc = ctypes.CDLL(None, use_errno=True)
        assert not os.access(containment.__file__, os.R_OK)  # EACCES, not a kill
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
        except ValueError:  # how Python words EPERM from setrlimit
            pass
        else:
            raise AssertionError("setrlimit after seal succeeded")
        assert libc.ioctl(1, 0x5402, 0) == -1 and ctypes.get_errno() == errno.ENOTTY  # TCSETS
        assert libc.syscall(containment.SYSCALLS["clone3"][ARCH], 0, 0) == -1
        assert ctypes.get_errno() == errno.ENOSYS
        print("done")
    """
    result = run_child(textwrap.dedent(body), before_seal=f"ARCH = {ARCH}")
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout


def test_seal_covers_threads_started_before_it(probe):
    require(probe, "seccomp")
    before_seal = """
        import threading, time
        go = threading.Event()
        def fork_later():
            go.wait()
            os.fork()
        threading.Thread(target=fork_later).start()
    """
    result = run_child("go.set()\ntime.sleep(5)\nprint('survived')", before_seal=before_seal)
    assert result.returncode == -signal.SIGSYS, result.stderr
    assert "2 threads" in " ".join(report_of(result)["applied"])


def test_network_is_unreachable_after_enter(probe):
    require(probe, "private network namespace")
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.5)
    body = f"""
        import socket
        for kind, attempt in [
            ("tcp", lambda: socket.create_connection(("127.0.0.1", {tcp.getsockname()[1]}), 2)),
            ("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
                b"hello", ("127.0.0.1", {udp.getsockname()[1]}))),
        ]:
            try:
                attempt()
            except OSError as exc:
                print(kind, "refused", exc.errno)
            else:
                print(kind, "reached")
    """
    with tcp, udp:
        result = run_child(body, seal=False)
        tcp.settimeout(0.2)
        with pytest.raises(TimeoutError):
            tcp.accept()
        with pytest.raises(TimeoutError):
            udp.recvfrom(100)
    assert result.returncode == 0, result.stderr
    assert "tcp refused" in result.stdout and "udp refused" in result.stdout


def test_landlock_refuses_writes_outside_writable_dirs(tmp_path, probe):
    require(probe, "landlock")
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    elsewhere.mkdir()
    (elsewhere / "old.txt").write_text("old")
    body = f"""
        open({str(allowed / "ok.txt")!r}, "w").write("ok")
        for attempt in [
            lambda: open({str(elsewhere / "new.txt")!r}, "w"),
            lambda: open({str(elsewhere / "old.txt")!r}, "a"),
            lambda: os.unlink({str(elsewhere / "old.txt")!r}),
            lambda: os.mkdir({str(elsewhere / "dir")!r}),
            lambda: os.rename({str(elsewhere / "old.txt")!r}, {str(allowed / "moved.txt")!r}),
        ]:
            try:
                attempt()
            except OSError as exc:  # EACCES; EXDEV for a rename across directories
                print("refused", exc.errno)
        print(open({str(elsewhere / "old.txt")!r}).read())
    """
    result = run_child(body, seal=False, writable=[allowed])
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("refused") == 5
    assert (allowed / "ok.txt").read_text() == "ok"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["old.txt"]
    assert (elsewhere / "old.txt").read_text() == "old"


def test_enter_after_threads_start_says_what_degraded():
    script = PRELUDE + textwrap.dedent("""
        import threading, time
        threading.Thread(target=time.sleep, args=(1,)).start()
        print('REPORT', containment.enter().as_dict())
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    degraded = " ".join(report_of(result)["degraded"])
    assert "threads already running" in degraded


def test_environment_variable_turns_containment_off_and_says_so(tmp_path):
    target = tmp_path / "written.txt"
    result = run_child(f"open({str(target)!r}, 'w').write('x')", env={containment.ENV: "off"})
    assert result.returncode == 0, result.stderr
    report = report_of(result)
    assert report["applied"] == []
    assert any(f"{containment.ENV}=off" in entry for entry in report["degraded"])
    assert target.read_text() == "x"
    described = containment.Containment(**report).describe()
    assert "DEGRADED" in described and containment.ENV in described


def test_sandbox_violation_is_recognised_from_the_exit_status():
    assert containment.is_sandbox_violation(-signal.SIGSYS)
    assert not containment.is_sandbox_violation(-signal.SIGKILL)
    assert not containment.is_sandbox_violation(0)
    assert not containment.is_sandbox_violation(None)
    assert "SIGSYS" in containment.VIOLATION_MESSAGE


@pytest.mark.parametrize("machine", sorted(containment.ARCHES))
def test_filter_jumps_stay_inside_the_program(machine):
    program = containment.build_filter(machine, own_pid=1234, allow_ioctl=True)
    assert len(program) < 4096  # BPF_MAXINSNS
    for index, (code, jt, jf, _) in enumerate(program):
        if code & 0x07 == 0x05:  # BPF_JMP
            assert index + 1 + max(jt, jf) < len(program)
    assert program[-1] == (0x06, 0, 0, containment.KILL)


@pytest.mark.parametrize("gpu", [True, False])
def test_a_gpu_worker_may_name_its_threads(gpu, probe):
    """The NVIDIA driver names its threads at cuInit (writing /proc/self/task/TID/comm);
    refused, cuInit fails with CUDA_ERROR_OPERATING_SYSTEM and the worker cannot use the
    GPU (seen on an H100). A GPU worker keeps that one write; a CPU worker does not."""
    require(probe, "landlock")
    from pytest_r3.replay.worker import writable_paths

    body = """
        import ctypes, threading
        ready, stop = threading.Event(), threading.Event()
        worker = threading.Thread(target=lambda: (ready.set(), stop.wait()))
        worker.start()
        ready.wait()
        libc = ctypes.CDLL(None)
        code = libc.pthread_setname_np(ctypes.c_ulong(worker.ident), b"r3-probe")
        stop.set()
        worker.join()
        print("setname", code)
    """
    result = run_child(body, seal=False, writable=writable_paths(gpu))
    assert result.returncode == 0, result.stderr
    assert ("setname 0" in result.stdout) == gpu, result.stdout


@pytest.mark.parametrize("gpu", [True, False])
def test_a_gpu_driver_after_seal_may_make_pipes_and_is_refused_files(gpu, probe):
    """The NVIDIA driver opens files lazily (a new thread's name) and makes pipes (loading a
    candidate's module) at a sealed worker's first launches: the worker was killed by SIGSYS
    on an H100. A GPU worker's open fails with EACCES and pipe2 works; elsewhere both still
    end the worker."""
    require(probe, "seccomp")
    script = "\n".join([
        PRELUDE,
        "report = containment.enter()",
        f"containment.seal(report, allow_ioctl={gpu})",
        "r, w = os.pipe()",
        "print('pipe', flush=True)",
        "try:",
        "    open('/etc/hostname')",
        "except OSError as exc:",
        "    print('refused', exc.errno, flush=True)",
    ])
    child_env = {k: v for k, v in os.environ.items() if k != containment.ENV}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=60, env=child_env)
    if gpu:
        assert result.returncode == 0 and "refused 13" in result.stdout, result.stderr
        assert "pipe" in result.stdout  # the driver's pipe to its threads (pipe2 on an H100)
    else:
        assert result.returncode == -signal.SIGSYS and "pipe" not in result.stdout


def test_a_warning_after_seal_is_printed_without_killing_the_worker(probe):
    """Python prints a warning with its source line, read from the file: once sealed, that
    open ended the worker with SIGSYS, and the baseline itself was reported as a sandbox
    violation when numpy warned in the worker (a mean of nothing: timing with no case)."""
    require(probe, "seccomp")
    result = run_child("""
        import warnings
        warnings.warn("a drift", RuntimeWarning)
        np.mean(np.array([]))
        print("ALIVE", flush=True)
    """, before_seal="import numpy as np")
    assert result.returncode == 0, result.stderr
    assert "ALIVE" in result.stdout
    assert "RuntimeWarning: a drift" in result.stderr
    assert "Mean of empty slice" in result.stderr


def test_a_thread_that_frees_scratch_memory_after_seal_is_not_killed(probe):
    """A thread's malloc heap shrinking for the first time makes glibc read a /proc file:
    once sealed, a launch on a fresh thread that freed its scratch memory was killed as a
    sandbox violation, a correct rewrite rejected by chance."""
    require(probe, "seccomp")
    result = run_child("""
        import ctypes, threading
        libc = ctypes.CDLL(None)
        libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        def scratch():
            chunks = [libc.malloc(64 << 10) for _ in range(64)]
            for chunk in reversed(chunks):
                libc.free(chunk)
        for _ in range(3):
            thread = threading.Thread(target=scratch)
            thread.start()
            thread.join()
        print("FREED", flush=True)
    """)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "FREED" in result.stdout
