"""The outer loop: LLM source rewrites of a kernel, evolved in a MAP-Elites archive.

Nothing here is imported unless a model is configured (``--r3-llm-model``).
"""
