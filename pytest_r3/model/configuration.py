"""One configuration of a kernel, the same value from search to lock: macro values, pass
pipeline settings, launch tunables and, for a rewrite, new source text. Its ``key()`` is the
one hash every stage uses (results store, archive, lock, declaration)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field


def configuration_hash(macros: object, pipeline: object, launch: object,
                       source_text: str | None) -> str:
    """The hash of what changes the built code; the source enters by its own hash."""
    payload = json.dumps({"macros": macros, "pipeline": pipeline, "launch": launch,
                          "source": None if source_text is None else
                          hashlib.sha256(source_text.encode()).hexdigest()},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Configuration:
    """Overrides of a kernel's declared defaults; an empty one is the baseline."""

    macros: dict = field(default_factory=dict)
    pipeline: dict = field(default_factory=dict)
    source_text: str | None = None
    launch: dict = field(default_factory=dict)

    def key(self) -> str:
        return configuration_hash(self.macros, self.pipeline, self.launch, self.source_text)

    @property
    def is_rewrite(self) -> bool:
        return self.source_text is not None
