"""Operating-system containment of a replay worker, the process that runs untrusted candidates.

Two steps, both open to an unprivileged user, both stdlib + ctypes:

* :func:`enter`, first thing in the worker while it is still single-threaded (before numpy:
  OpenBLAS starts threads when it loads, and a multithreaded process can neither enter a
  user namespace nor be wholly covered by Landlock): no new privileges, no core files, no
  file written past :data:`FILE_SIZE_CAP` (RLIMIT_FSIZE), a
  private user + network namespace (no network at all), a Landlock domain that refuses every
  filesystem write outside ``writable_dirs`` and all TCP, and no signals or abstract unix
  sockets that leave the domain.
* :func:`seal`, once the worker has imported everything and built its baseline, just before
  the first candidate runs: a seccomp-BPF allowlist on every thread. What a numpy + llvmlite
  MCJIT + ctypes process needs stays allowed; opening any file, exec, fork, sockets, ptrace
  and anything unknown kill the whole process with SIGSYS (everything the worker needs is
  loaded before it is sealed).

Each step records what it applied and what it could not, and why, in a :class:`Containment`
report: nothing degrades silently, and ``PYTEST_R3_CONTAINMENT=off`` (for debugging) is
itself reported as degraded. The module is longer than most here because of the syscall
numbers of two architectures (x86_64, aarch64) and the BPF constants, written out.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import struct
import sys
import threading
import warnings
from dataclasses import dataclass, field

ENV = "PYTEST_R3_CONTAINMENT"
FILE_SIZE_CAP = 1 << 20  # RLIMIT_FSIZE of a contained process
VIOLATION_MESSAGE = ("the candidate made a system call the sandbox forbids (exec, fork, sockets, "
                     "opening files...); the worker was killed by SIGSYS")


@dataclass
class Containment:
    """What containment a process got: ``applied`` steps and ``degraded`` ones, with why."""

    applied: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)

    def describe(self) -> str:
        text = "containment: " + (", ".join(self.applied) or "nothing applied")
        return text + (f"; DEGRADED: {'; '.join(self.degraded)}" if self.degraded else "")

    def as_dict(self) -> dict:
        return {"applied": list(self.applied), "degraded": list(self.degraded)}


def disabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() in ("off", "0", "false", "no")


def is_sandbox_violation(returncode: int | None) -> bool:
    """Whether a child's exit status (negative signal number, as subprocess and
    multiprocessing give it) means seccomp killed it for a forbidden system call."""
    return returncode == -signal.SIGSYS


# --- enter: namespaces and Landlock ------------------------------------------------------

CLONE_NEWUSER, CLONE_NEWNET, CLONE_THREAD = 0x10000000, 0x40000000, 0x00010000
CLONE_NAMESPACES = 0x7E020080  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
PR_SET_NO_NEW_PRIVS = 38
SYS_LANDLOCK = (444, 445, 446)  # create_ruleset, add_rule, restrict_self (same on all arches)
# Landlock filesystem rights that write: WRITE_FILE, REMOVE_*, MAKE_* (ABI 1), REFER (2),
# TRUNCATE (3); of those only WRITE_FILE and TRUNCATE apply to a file (not a directory)
LANDLOCK_WRITE = {1: 0x1FF2, 2: 0x3FF2, 3: 0x7FF2}
LANDLOCK_FILE_RIGHTS = 0x4002
LANDLOCK_NET_TCP = 0x3          # BIND_TCP | CONNECT_TCP (ABI 4)
LANDLOCK_SCOPES = 0x3           # ABSTRACT_UNIX_SOCKET | SIGNAL (ABI 6)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(function, *args: object) -> int:
    """A libc call with every integer passed as a C long; a -1 result raises OSError."""
    result = function(*(ctypes.c_long(a) if isinstance(a, int) else a for a in args))
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, f"{errno.errorcode.get(code, code)}: {os.strerror(code)}")
    return result


def _syscall(number: int, *args: object) -> int:
    return _call(_libc.syscall, number, *args)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def enter(report: Containment | None = None, *, writable_dirs=()) -> Containment:
    """Contain this process as far as the kernel allows, before it starts any thread.

    ``writable_dirs`` (directories, or single files such as GPU device nodes) stay writable;
    everything else on the filesystem stays readable only.
    """
    report = report if report is not None else Containment()
    if disabled():
        report.degraded.append(f"all containment disabled by {ENV}={os.environ[ENV]}")
        return report
    if not sys.platform.startswith("linux"):
        report.degraded.append(f"no containment on {sys.platform} (Linux only)")
        return report
    threads = _threads()
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    report.applied.append("no core files")
    # no file grows past this, whatever descriptor a worker holds (a write beyond it fails
    # with EFBIG: Python ignores SIGXFSZ); both limits, so it cannot be raised again
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_CAP, FILE_SIZE_CAP))
    report.applied.append(f"files capped at {FILE_SIZE_CAP >> 20} MiB")
    try:
        _call(_libc.prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        report.applied.append("no_new_privs")
    except OSError as exc:
        report.degraded.append(f"no_new_privs: prctl refused ({exc})")
    _private_network(report, threads)
    _landlock(report, [os.devnull, *writable_dirs], threads)
    return report


def _private_network(report: Containment, threads: int) -> None:
    uid, gid = os.getuid(), os.getgid()
    try:
        _call(_libc.unshare, CLONE_NEWUSER | CLONE_NEWNET)
    except OSError as exc:
        why = f"{threads} threads already running" if threads > 1 else \
            "user namespaces disabled or not permitted"
        report.degraded.append(f"network: unshare(user+net namespace) refused ({exc}; {why}): "
                               "the network stays reachable except TCP under Landlock ABI 4+")
        return
    report.applied.append("private network namespace (no network)")
    try:  # keep our ids inside the namespace (otherwise they read as 65534)
        for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"),
                           ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as file:
                file.write(text)
    except OSError as exc:
        report.degraded.append(f"user namespace: ids not mapped ({exc}); they read as 65534")
    try:  # the namespace's creator holds every capability in it (netfilter, mounts): drop them
        header = ctypes.create_string_buffer(struct.pack("<Ii", 0x20080522, 0), 8)  # version 3
        _call(_libc.capset, header, ctypes.create_string_buffer(24))
        report.applied.append("no capabilities")
    except OSError as exc:
        report.degraded.append(f"capabilities: capset refused ({exc})")


def _landlock(report: Containment, writable: list, threads: int) -> None:
    create, add_rule, restrict = SYS_LANDLOCK
    try:
        abi = _syscall(create, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    except OSError as exc:
        why = {errno.ENOSYS: "kernel has no Landlock",
               errno.EOPNOTSUPP: "Landlock is disabled at boot"}.get(exc.errno, "refused")
        report.degraded.append(f"landlock: {why} ({exc}): the filesystem stays writable")
        return
    fs_rights = LANDLOCK_WRITE[min(abi, 3)]
    net_rights = LANDLOCK_NET_TCP if abi >= 4 else 0
    scopes = LANDLOCK_SCOPES if abi >= 6 else 0
    attr = ctypes.create_string_buffer(struct.pack("<QQQ", fs_rights, net_rights, scopes), 24)
    try:
        ruleset = _syscall(create, attr, 24, 0)
    except OSError as exc:
        report.degraded.append(f"landlock: ruleset refused ({exc}): the filesystem stays writable")
        return
    granted = []
    try:
        for path in writable:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rights = fs_rights if os.path.isdir(path) else fs_rights & LANDLOCK_FILE_RIGHTS
                    rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd), 12)
                    _syscall(add_rule, ruleset, 1, rule, 0)  # LANDLOCK_RULE_PATH_BENEATH
                finally:
                    os.close(fd)
                granted.append(str(path))
            except OSError as exc:
                report.degraded.append(f"landlock: {path} not made writable ({exc})")
        _syscall(restrict, ruleset, 0)
    except OSError as exc:
        report.degraded.append(f"landlock: restrict_self refused ({exc})")
        return
    finally:
        os.close(ruleset)
    extras = ", no TCP" if net_rights else ""
    extras += ", signals and abstract sockets scoped" if scopes else ""
    report.applied.append(f"landlock ABI {abi}: no filesystem writes except "
                          f"{', '.join(granted)}{extras}")
    if abi < 4:
        report.degraded.append(f"landlock: ABI {abi} < 4, TCP not restricted by Landlock")
    if threads > 1:
        report.degraded.append(f"landlock: {threads} threads already running; only the "
                               "calling thread (and threads it starts) is restricted")


# --- seal: the seccomp allowlist -----------------------------------------------------------

ALLOW, KILL, TRAP = 0x7FFF0000, 0x80000000, 0x00030000


def _errno(code: int) -> int:
    return 0x00050000 | code


# name: (x86_64 number, aarch64 number); None where the architecture lacks the call
SYSCALLS = {
    "read": (0, 63), "write": (1, 64), "readv": (19, 65), "writev": (20, 66),
    "pread64": (17, 67), "pwrite64": (18, 68), "lseek": (8, 62), "close": (3, 57),
    "fstat": (5, 80), "newfstatat": (262, 79), "statx": (332, 291), "stat": (4, None),
    "lstat": (6, None), "mmap": (9, 222), "munmap": (11, 215), "mprotect": (10, 226),
    "mremap": (25, 216), "madvise": (28, 233), "brk": (12, 214), "futex": (202, 98),
    "set_robust_list": (273, 99), "rseq": (334, 293), "membarrier": (324, 283),
    "set_tid_address": (218, 96), "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135),
    "rt_sigreturn": (15, 139), "sigaltstack": (131, 132), "restart_syscall": (219, 128),
    "setitimer": (38, 103), "getitimer": (36, 102), "alarm": (37, None),
    "clock_gettime": (228, 113), "clock_getres": (229, 114), "clock_nanosleep": (230, 115),
    "nanosleep": (35, 101), "gettimeofday": (96, 169), "getpid": (39, 172),
    "gettid": (186, 178), "getppid": (110, 173), "getuid": (102, 174), "geteuid": (107, 175),
    "getgid": (104, 176), "getegid": (108, 177), "exit": (60, 93), "exit_group": (231, 94),
    "sched_yield": (24, 124), "sched_getaffinity": (204, 123), "getcpu": (309, 168),
    "getrandom": (318, 278), "poll": (7, None), "ppoll": (271, 73), "select": (23, None),
    "pselect6": (270, 72), "epoll_create1": (291, 20), "epoll_ctl": (233, 21),
    "epoll_wait": (232, None), "epoll_pwait": (281, 22), "epoll_pwait2": (441, 441),
    "dup": (32, 23), "dup2": (33, None), "dup3": (292, 24), "getrusage": (98, 165),
    "times": (100, 153), "getcwd": (79, 17), "uname": (63, 160), "sysinfo": (99, 179),
    "open": (2, None), "openat": (257, 56), "openat2": (437, 437), "fcntl": (72, 25),
    "ioctl": (16, 29), "prlimit64": (302, 261), "clone": (56, 220), "clone3": (435, 435),
    "kill": (62, 129), "tgkill": (234, 131), "prctl": (157, 167), "mbind": (237, 235),
    "set_mempolicy": (238, 237), "get_mempolicy": (239, 236), "readlink": (89, None),
    "readlinkat": (267, 78), "access": (21, None), "faccessat": (269, 48),
    "faccessat2": (439, 439), "getdents64": (217, 61), "pipe": (22, None), "pipe2": (293, 59),
}
ARCHES = {  # machine: (index into SYSCALLS, AUDIT_ARCH_*, x32 syscalls to refuse)
    "x86_64": (0, 0xC000003E, True),
    "aarch64": (1, 0xC00000B7, False),
}
ALWAYS_ALLOWED = [name for name in SYSCALLS if name not in (
    "open openat openat2 fcntl ioctl prlimit64 clone clone3 kill tgkill prctl mbind "
    "set_mempolicy get_mempolicy readlink readlinkat access faccessat faccessat2 getdents64 "
    "pipe pipe2").split()]
TTY_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)  # TCGETS TIOCGWINSZ FIONREAD
#                                                   FIONBIO FIONCLEX FIOCLEX
TTY_INJECTION = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX: push input into a terminal
FCNTL_SIGNALLING = (8, 10, 15, 1024, 1026)  # F_SETOWN F_SETSIG F_SETOWN_EX F_SETLEASE F_NOTIFY
PRCTL_NAMING = (15, 16, 0x53564D41)  # PR_SET_NAME, PR_GET_NAME, PR_SET_VMA


def _rules(own_pid: int, allow_ioctl: bool) -> dict[str, tuple[list, int]]:
    """Per syscall: checks ``(argument, word, test, value, action)``, first match wins,
    and the action when none matches."""
    rules: dict[str, tuple[list, int]] = {name: ([], ALLOW) for name in ALWAYS_ALLOWED}
    # no file is opened once sealed: everything the worker needs was loaded before
    rules["open"] = rules["openat"] = ([], KILL)
    rules["clone"] = ([(0, "lo", "any", CLONE_NAMESPACES, KILL),
                       (0, "lo", "any", CLONE_THREAD, ALLOW)], KILL)
    rules["kill"] = rules["tgkill"] = ([(0, "lo", "eq", own_pid, ALLOW)], KILL)
    rules["prlimit64"] = ([(2, "hi", "ne", 0, _errno(errno.EPERM)),  # setting a limit
                           (2, "lo", "ne", 0, _errno(errno.EPERM)),
                           (0, "lo", "eq", 0, ALLOW), (0, "lo", "eq", own_pid, ALLOW)],
                          _errno(errno.EPERM))
    rules["fcntl"] = ([(1, "lo", "eq", cmd, _errno(errno.EPERM)) for cmd in FCNTL_SIGNALLING],
                      ALLOW)
    if allow_ioctl:
        rules["ioctl"] = ([(1, "lo", "eq", cmd, _errno(errno.EPERM)) for cmd in TTY_INJECTION],
                          ALLOW)
        # a GPU driver opens files lazily (its new threads' names, at the first launches):
        # refused, it carries on; no file is opened either way
        rules["open"] = rules["openat"] = ([], _errno(errno.EACCES))
        # and makes a pipe to its own threads when a new module is loaded (a candidate's)
        rules["pipe"] = rules["pipe2"] = ([], ALLOW)
    else:
        rules["ioctl"] = ([(1, "lo", "eq", cmd, ALLOW) for cmd in TTY_IOCTLS],
                          _errno(errno.ENOTTY))
    rules["prctl"] = ([(0, "lo", "eq", option, ALLOW) for option in PRCTL_NAMING],
                      _errno(errno.EPERM))
    for name in ("openat2", "clone3"):  # arguments out of reach in a struct: glibc falls back
        rules[name] = ([], _errno(errno.ENOSYS))
    for name in ("mbind", "set_mempolicy", "get_mempolicy"):  # OpenBLAS hints: as without NUMA
        rules[name] = ([], _errno(errno.ENOSYS))
    for name in ("readlink", "readlinkat", "access", "faccessat", "faccessat2", "getdents64"):
        rules[name] = ([], _errno(errno.EACCES))
    return rules


_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|K, BPF_RET


def build_filter(machine: str, own_pid: int, allow_ioctl: bool = False,
                 default: int = KILL) -> list[tuple[int, int, int, int]]:
    """The classic-BPF program, as ``(code, jt, jf, k)`` instructions."""
    index, audit_arch, refuse_x32 = ARCHES[machine]
    program = [(_LD, 0, 0, 4), (_JEQ, 1, 0, audit_arch), (_RET, 0, 0, KILL), (_LD, 0, 0, 0)]
    if refuse_x32:
        program += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, KILL)]
    for name, (checks, otherwise) in _rules(own_pid, allow_ioctl).items():
        number = SYSCALLS[name][index]
        if number is None:
            continue
        body = []
        for arg, word, test, value, action in checks:
            offset = 16 + 8 * arg + (4 if word == "hi" else 0)
            jump = (_JEQ, 1, 0) if test == "ne" else (_JEQ if test == "eq" else _JSET, 0, 1)
            body += [(_LD, 0, 0, offset), (*jump, value), (_RET, 0, 0, action)]
        body.append((_RET, 0, 0, otherwise))
        program += [(_JEQ, 0, len(body), number), *body]
    return program + [(_RET, 0, 0, default)]


def _warnings_without_source() -> None:
    """Python prints a warning with its source line, read from the file when the warning
    is shown: once sealed, that open would end the process (a numpy RuntimeWarning in the
    worker reported as the candidate's sandbox violation). Shown without the line instead."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        stream = file if file is not None else sys.stderr
        if stream is not None:
            stream.write(warnings.formatwarning(message, category, filename, lineno, line=""))
    warnings.showwarning = show


def _settle_allocator() -> None:
    """glibc's malloc reads /proc/sys/vm/overcommit_memory the first time a thread's heap
    (any arena but the main one) shrinks, and caches the answer. Sealed, that open ends the
    process: a launch on a fresh thread that allocates and frees scratch memory (a correct
    rewrite's packed tile, numpy's temporaries) was killed as a sandbox violation, by chance.
    A thread's heap is grown and shrunk once here, before the filter, so the answer is read
    now; the allocator then behaves as in any process."""
    malloc, free = _libc.malloc, _libc.free
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.restype, free.argtypes = None, [ctypes.c_void_p]

    def grow_and_shrink() -> None:
        chunks = [malloc(64 << 10) for _ in range(64)]  # below the mmap threshold: heap
        for chunk in reversed(chunks):
            free(chunk)

    thread = threading.Thread(target=grow_and_shrink, name="r3-settle")
    thread.start()
    thread.join()


def seal(report: Containment | None = None, *, allow_ioctl: bool = False,
         default: int = KILL) -> Containment:
    """Install the seccomp allowlist on every thread of this process; irreversible.

    ``allow_ioctl`` (a GPU driver's process) lets ioctl through (GPU drivers speak ioctl)
    except terminal input injection, and makes opening a file fail (EACCES) rather than end
    the process: the driver opens files lazily and carries on without them.
    ``default`` is the action on anything not allowed (TRAP for debugging).
    """
    report = report if report is not None else Containment()
    if disabled():
        report.degraded.append(f"seccomp: disabled by {ENV}={os.environ[ENV]}")
        return report
    machine = os.uname().machine.lower()
    if not sys.platform.startswith("linux") or machine not in ARCHES:
        report.degraded.append(f"seccomp: no syscall table for {sys.platform} {machine}")
        return report
    _warnings_without_source()
    _settle_allocator()
    program = build_filter(machine, os.getpid(), allow_ioctl, default)
    threads = _threads()  # now: /proc cannot be listed once sealed
    raw = b"".join(struct.pack("<HBBI", *instruction) for instruction in program)
    instructions = ctypes.create_string_buffer(raw, len(raw))
    fprog = struct.pack("<HxxxxxxQ", len(program), ctypes.addressof(instructions))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    seccomp = 317 if machine == "x86_64" else 277
    # TSYNC: all threads (OpenBLAS's too); SPEC_ALLOW: no store-bypass mitigation forced
    # on, which would slow candidates and baseline unevenly (it guards nothing here)
    try:
        _call(_libc.prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        for flags in (0x1 | 0x4, 0x1):
            try:
                result = _syscall(seccomp, 1, flags, fprog_buffer)  # SET_MODE_FILTER
                break
            except OSError as exc:
                if exc.errno != errno.EINVAL or flags == 0x1:
                    raise
    except OSError as exc:
        report.degraded.append(f"seccomp: filter refused ({exc}): system calls unrestricted")
        return report
    if result > 0:  # TSYNC names a thread it could not synchronise
        report.degraded.append(f"seccomp: thread {result} could not take the filter")
        return report
    report.applied.append(f"seccomp allowlist ({len(program)} BPF instructions, "
                          f"{threads} thread{'s' if threads > 1 else ''})")
    return report
