"""Two read-only inputs passed as one array, a derived case the recordings seldom hold.

``matmul(n, a, a, c)`` squares a matrix: ordinary callers pass one array as two read-only
arguments, and a kernel declared ``no_alias`` (callers never pass overlapping buffers to
be *written*) or with ``restrict`` on its inputs allows it all the same, since nothing
written overlaps. A rewrite keyed on ``a == b`` was accepted and then wrong in the user's
application. So each pair of read-only pointer parameters of the same dtype and shape is
passed as one buffer, beside an out-of-place twin holding the same values in two buffers;
the judge keeps the shared case only where the baseline gives the same outputs both ways.
"""

from __future__ import annotations

import numpy as np

from . import verify
from .cases import Derived, Slot


def plan(case, rng: np.random.Generator) -> list[Derived]:
    """The shared-input cases of ``case`` (a recording with ``label``, ``scalars``,
    ``slots``), each preceded by its twin."""
    found: list[Derived] = []
    inputs = [s for s in case.slots if len(s.params) == 1 and not s.views and not s.written]
    for index, first in enumerate(inputs):
        for second in inputs[index + 1:]:
            if first.values.dtype != second.values.dtype or \
                    first.values.shape != second.values.shape:
                continue
            pair = (first.params[0], second.params[0])
            values = verify.perturbed(first.values, rng, integers=True)
            shared = Slot(list(pair), False, values)
            together = [shared if s is first else s for s in case.slots if s is not second]
            apart = [Slot(s.params, False, values.copy()) if s is first or s is second else s
                     for s in case.slots]
            twin = Derived(f"{case.label} with {pair[1]} holding {pair[0]}'s values in its own "
                           "array", dict(case.scalars), apart, origin="twin")
            found += [twin, Derived(f"{case.label} with the read-only inputs {pair[0]} and "
                                    f"{pair[1]} the same array", dict(case.scalars), together,
                                    pair, twin)]
    return found
