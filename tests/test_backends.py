"""Backends: the built-in CPU backend's contract, and third-party backends through pluggy."""

from __future__ import annotations

import numpy as np
import pytest

import pytest_r3 as r3
from pytest_r3 import backends
from pytest_r3.backends import clang as toolchain
from pytest_r3.backends.base import REQUIRED_METHODS, Backend, check_backend
from pytest_r3.backends.cpu import CPUBackend, CPULauncher


class NotABackend:
    """Has two of the seven methods a backend needs."""

    def target_name(self):
        return "nowhere"

    def compile(self, source, macros):
        return ""


class HalfBackend(Backend):
    """Subclasses the contract but leaves most of it abstract."""

    name = "half"

    def target_name(self):
        return "half"

    def compile(self, source, macros):
        return ""


class CopyOfCPU(CPUBackend):
    """A complete third-party backend (reusing the CPU machinery)."""

    name = "cpu-copy"


class BackendPlugin:
    """A pytest_r3 plugin offering backends by name, as an entry point module would."""

    def __init__(self, makers):
        self.makers = makers

    @r3.hookimpl
    def pytest_r3_backend_names(self):
        return list(self.makers)

    @r3.hookimpl
    def pytest_r3_make_backend(self, name):
        maker = self.makers.get(name)
        return maker() if maker else None


class GreedyPlugin:
    """A badly written plugin that answers for every backend name."""

    @r3.hookimpl
    def pytest_r3_make_backend(self, name):
        return CopyOfCPU()


@pytest.fixture
def register(monkeypatch):
    """Register plugins on pytest-r3's plugin manager for one test, with no backend cached."""
    manager = backends.plugin_manager()
    registered = []
    monkeypatch.setattr(backends, "_instances", {})

    def add(plugin):
        manager.register(plugin)
        registered.append(plugin)
        return plugin

    yield add
    for plugin in registered:
        manager.unregister(plugin)


def test_check_backend_names_the_missing_methods():
    with pytest.raises(r3.BackendError) as excinfo:
        check_backend(NotABackend(), "partial")
    message = str(excinfo.value)
    assert "backend 'partial' (test_backends.NotABackend) does not implement " \
           "inspect, load, launch, time, to_host;" in message
    assert f"a backend must provide {', '.join(REQUIRED_METHODS)}" in message
    check_backend(CPUBackend(), "cpu")  # the built-in one is complete


def test_incomplete_backend_from_a_plugin_is_refused(register, kernel_dir):
    register(BackendPlugin({"partial": NotABackend}))
    assert "partial" in backends.available_backends()
    with pytest.raises(r3.BackendError) as excinfo:
        backends.get_backend("partial")
    assert "does not implement inspect, load, launch, time, to_host" in str(excinfo.value)
    with pytest.raises(r3.BackendError, match="backend 'partial'.*does not implement inspect"):
        r3.kernel(kernel_dir / "axpy.c", entry="axpy", name="never", backend="partial")
    assert "never" not in r3.registry()


def test_abstract_backend_subclass_from_a_plugin_is_refused(register):
    register(BackendPlugin({"half": HalfBackend}))
    with pytest.raises(r3.BackendError) as excinfo:
        backends.get_backend("half")
    message = str(excinfo.value)
    assert message.startswith("backend 'half' is incomplete")
    for method in ("inspect", "load", "launch", "time", "to_host"):
        assert method in message
    assert "pytest_r3.backends.base.Backend" in message


def test_complete_third_party_backend_is_used(register, kernel_dir, unique_name):
    register(BackendPlugin({"cpu-copy": CopyOfCPU}))
    assert backends.available_backends()[:2] == ["cpu", "cuda"]
    assert "cpu-copy" in backends.available_backends()
    kernel = r3.kernel(kernel_dir / "axpy.c", entry="axpy", name=unique_name(),
                       backend="cpu-copy")
    assert type(kernel.backend) is CopyOfCPU
    assert backends.get_backend("cpu-copy") is kernel.backend  # one shared instance
    y = np.zeros(3, np.float32)
    kernel(3, 2.0, np.ones(3, np.float32), y)
    np.testing.assert_array_equal(y, 2.0)


def test_a_plugin_cannot_take_over_the_builtin_backend(register):
    register(GreedyPlugin())
    assert type(backends.get_backend("cpu")) is CPUBackend
    assert type(backends.get_backend("anything")) is CopyOfCPU


def test_unknown_backend_lists_the_available_ones():
    with pytest.raises(r3.BackendError) as excinfo:
        backends.get_backend("metal")
    assert str(excinfo.value).startswith(
        "no backend named 'metal'; available backends: cpu, cuda, hip.")
    assert "'pytest_r3' entry-point group" in str(excinfo.value)


# -- the CPU backend's side of the contract ---------------------------------------------------


def test_cpu_backend_contract(axpy):
    backend = backends.get_backend("cpu")
    assert backend is backends.get_backend("cpu")
    assert backend.target_name() == toolchain.host_target().name
    launcher = axpy.build()
    assert isinstance(launcher, CPULauncher)
    x, y = np.ones(16, np.float32), np.zeros(16, np.float32)
    assert backend.launch(launcher, (16, 1.0, x, y)) is None
    np.testing.assert_array_equal(y, 1.0)
    times = backend.time(launcher, (16, 1.0, x, y), repeat=5)
    assert len(times) == 5
    assert all(t > 0 for t in times)
    np.testing.assert_array_equal(y, 6.0)  # each timed launch really ran
    with pytest.raises(r3.LaunchError):
        backend.time(launcher, (16, 1.0, x), repeat=1)
    host = backend.to_host(y)
    assert host is not y and np.array_equal(host, y)
    assert backend.to_host(3.5) == 3.5


def test_cpu_backend_compiles_for_the_host(axpy):
    backend = backends.get_backend("cpu")
    ir = backend.compile(axpy.source, {"UNROLL": 2})
    assert f'target triple = "{toolchain.host_target().triple}"' in ir
    assert "llvm.loop.unroll.count" in ir
