"""Recording kernel launches and the on-disk recording store (see ``store``)."""

from .store import CorruptRecording, Recording, RecordingStore, capture

__all__ = ["CorruptRecording", "Recording", "RecordingStore", "capture"]
