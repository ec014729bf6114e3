"""What a GPU timing needs besides the events: the device's L2 size and peak memory
bandwidth (from its attributes), and its clocks at measurement time (from NVML).

A kernel timed twice on the same data finds it in L2 the second time, so each timed launch
follows a write over a buffer at least the L2's size (:func:`flush_bytes`). The peak memory
bandwidth (memory clock x bus width x 2, double data rate) bounds how fast a launch can
move its bytes: a time below that bound is not a measurement of the kernel
(``replay/device_timing`` flags it). The SM and memory clocks, the temperature and the
reasons the clocks are held down (power cap, thermal slowdown...) are read with NVML
(``nvidia-ml-py``, in the ``cuda`` extra) where it is installed; without it, the timing
says why no clocks were recorded. Pure logic except :class:`Nvml`, which talks to the
library; nothing here needs a GPU to be imported or tested.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

MIB = 1 << 20
# without an L2 size from the device: larger than any GPU's L2 so far (H100: 50 MiB,
# B200: 126 MiB)
DEFAULT_FLUSH_BYTES = 256 * MIB
WARMUP_LAUNCHES = 3  # untimed launches before a loaded variant's first timed one
# NVML's clock event ("throttle") reason bits, named as NVML names them
THROTTLE_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
NVML_PACKAGE = "nvidia-ml-py"


def flush_bytes(l2_bytes: int) -> int:
    """Bytes written between timed launches to evict the L2: twice its size (its
    replacement is not strictly least-recently-used), in whole MiB; the default when the
    device does not say."""
    if l2_bytes <= 0:
        return DEFAULT_FLUSH_BYTES
    return -(-2 * l2_bytes // MIB) * MIB


def peak_bandwidth(memory_clock_khz: int, bus_width_bits: int) -> float:
    """Bytes per second the memory can move at most: clock x bus width x 2 (double data
    rate); 0.0 when either is unknown."""
    if memory_clock_khz <= 0 or bus_width_bits <= 0:
        return 0.0
    return memory_clock_khz * 1e3 * 2 * bus_width_bits / 8


def throttle_names(mask: int) -> tuple[str, ...]:
    """NVML's reason bits as names (``sw_power_cap``...); idle alone is not a slowdown
    while a kernel runs, but it is listed like the others."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(f"other_0x{unknown:x}")
    return tuple(names)


@dataclass(frozen=True)
class DeviceFacts:
    """What a GPU is, read once when a worker starts (before any candidate runs there):
    name, architecture, L2 size, memory clock and bus width, and where these came from."""

    name: str = ""
    arch: str = ""
    l2_bytes: int = 0
    memory_clock_khz: int = 0
    bus_width_bits: int = 0
    source: str = "device attributes"  # or "NVML" where the attributes gave none

    @property
    def peak_bandwidth(self) -> float:
        return peak_bandwidth(self.memory_clock_khz, self.bus_width_bits)

    @property
    def flush_bytes(self) -> int:
        return flush_bytes(self.l2_bytes)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> DeviceFacts | None:
        """The facts ``data`` describes, or None if it does not (a CPU worker sends none)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(str(data.get("name", "")), str(data.get("arch", "")),
                       max(0, int(data.get("l2_bytes", 0))),
                       max(0, int(data.get("memory_clock_khz", 0))),
                       max(0, int(data.get("bus_width_bits", 0))),
                       str(data.get("source", "device attributes")))
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Clocks:
    """The GPU's state at measurement time, or why it was not read (``reason``)."""

    sm_mhz: int = 0
    memory_mhz: int = 0
    temperature_c: int = 0
    power_w: float = 0.0
    throttle: tuple[str, ...] = field(default_factory=tuple)
    reason: str = ""  # "" when read

    @property
    def read(self) -> bool:
        return not self.reason

    def describe(self) -> str:
        """``SM 1980 MHz, memory 2619 MHz, 41 C, 312 W, not throttled``, or the reason."""
        if not self.read:
            return f"GPU clocks not recorded: {self.reason}"
        held = [name for name in self.throttle if name != "gpu_idle"]
        return (f"SM {self.sm_mhz} MHz, memory {self.memory_mhz} MHz, "
                f"{self.temperature_c} C, {self.power_w:.0f} W, "
                + (f"clocks held down by {', '.join(held)}" if held else "not throttled"))

    def as_dict(self) -> dict:
        return {**asdict(self), "throttle": list(self.throttle)}

    @classmethod
    def from_dict(cls, data: object) -> Clocks:
        if not isinstance(data, dict):
            return cls(reason="no clock reading was sent")
        try:
            return cls(int(data.get("sm_mhz", 0)), int(data.get("memory_mhz", 0)),
                       int(data.get("temperature_c", 0)), float(data.get("power_w", 0.0)),
                       tuple(str(x) for x in data.get("throttle", ())),
                       str(data.get("reason", "")))
        except (TypeError, ValueError):
            return cls(reason="a malformed clock reading was sent")


class Nvml:
    """NVML for one device (found by its PCI bus id, so it is the GPU CUDA runs on whatever
    ``CUDA_VISIBLE_DEVICES`` says). Opened before a worker is sealed; each reading after
    that only queries it. Never raises: a missing package or library is ``reason``."""

    def __init__(self, pci_bus_id: str) -> None:
        self.reason = ""
        self.handle = None
        self.nvml = None
        try:
            import pynvml
        except ImportError:
            self.reason = (f"{NVML_PACKAGE} is not installed (pip install "
                           '"pytest-r3[cuda]" installs it)')
            return
        try:
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
            self.nvml = pynvml
        except Exception as exc:  # no library, no permission, an unknown bus id
            self.reason = f"NVML could not be opened ({type(exc).__name__}: {exc})"

    @classmethod
    def unavailable(cls, reason: str) -> Nvml:
        """An NVML that reads nothing, for ``reason``."""
        nvml = cls.__new__(cls)
        nvml.reason, nvml.handle, nvml.nvml = reason, None, None
        return nvml

    def memory(self) -> tuple[int, int]:
        """(max memory clock in kHz, bus width in bits) from NVML, (0, 0) if unknown: for
        devices whose attributes no longer report the memory clock."""
        if self.handle is None:
            return 0, 0
        try:
            clock = self.nvml.nvmlDeviceGetMaxClockInfo(self.handle, self.nvml.NVML_CLOCK_MEM)
            width = self.nvml.nvmlDeviceGetMemoryBusWidth(self.handle)
            return int(clock) * 1000, int(width)
        except Exception:  # an older driver: no peak, so no speed-of-light check
            return 0, 0

    def clocks(self) -> Clocks:
        if self.handle is None:
            return Clocks(reason=self.reason)
        nvml, handle = self.nvml, self.handle
        try:
            reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            return Clocks(
                sm_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                memory_mhz=int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
                temperature_c=int(nvml.nvmlDeviceGetTemperature(handle,
                                                                 nvml.NVML_TEMPERATURE_GPU)),
                power_w=_power_watts(nvml, handle),
                throttle=throttle_names(int(reasons(handle))))
        except Exception as exc:  # a query the sealed worker or the driver refused
            return Clocks(reason=f"NVML query failed ({type(exc).__name__}: {exc})")


def _power_watts(nvml, handle) -> float:
    try:
        return nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
    except Exception:  # not every board reports its power
        return 0.0
