"""Replaying recorded launches in a persistent, sandboxed worker process."""

from .client import ReplayError, ReplayServer
from .evaluate import ReplaySettings
from .protocol import STATUSES, Candidate, KernelSpec, Result

__all__ = ["STATUSES", "Candidate", "KernelSpec", "ReplayError", "ReplayServer",
           "ReplaySettings", "Result"]
