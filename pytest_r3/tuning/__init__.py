"""Tuning and checking kernels, in plain Python: no pytest here. The pytest plugin builds a
:class:`~pytest_r3.tuning.context.Tuning` (settings, where state lives, how to re-run the
oracle tests, where progress goes) and calls :func:`tune.tune_kernel` or
:func:`check.check_kernel`."""
