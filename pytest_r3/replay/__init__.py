"""Replaying recorded launches: candidates run in a contained worker process, and are judged
in the parent."""

from .client import ReplayError, ReplayServer
from .protocol import STATUSES, Candidate, KernelSpec, ReplaySettings, Result

__all__ = ["STATUSES", "Candidate", "KernelSpec", "ReplayError", "ReplayServer",
           "ReplaySettings", "Result"]
