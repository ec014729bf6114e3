"""Talking to any OpenAI-compatible chat-completions endpoint, within a budget.

Rate limits, timeouts, connection and server errors are retried with exponential backoff;
an answer that still fails is returned as a failed Reply with the reason, never raised, so
a flaky model never ends a tuning run.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LLMSettings:
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.7
    timeout: float = 120.0
    concurrency: int = 2
    max_requests: int = 40
    max_tokens: int = 400_000       # prompt + completion tokens over the run
    max_seconds: float = 1800.0
    retries: int = 3
    backoff: float = 1.0            # seconds, doubled per retry


@dataclass
class Reply:
    ok: bool
    text: str = ""
    reason: str = ""
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0


@dataclass
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    wait_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)


class LLMClient:
    def __init__(self, settings: LLMSettings) -> None:
        import openai

        self.settings = settings
        api_key = os.environ.get(settings.api_key_env) or "not-needed"
        # retries are ours (with the budget in view), not the client's
        self._client = openai.OpenAI(base_url=settings.base_url, api_key=api_key,
                                     timeout=settings.timeout, max_retries=0)
        self._pool = ThreadPoolExecutor(max_workers=max(1, settings.concurrency),
                                        thread_name_prefix="r3-llm")
        self._lock = threading.Lock()
        self.usage = Usage()

    def budget_left(self) -> str | None:
        """None while requests may still be made, else why not."""
        usage, settings = self.usage, self.settings
        if usage.requests >= settings.max_requests:
            return f"request budget of {settings.max_requests} used"
        if usage.prompt_tokens + usage.completion_tokens >= settings.max_tokens:
            return f"token budget of {settings.max_tokens} used"
        if time.perf_counter() - usage.started >= settings.max_seconds:
            return f"time budget of {settings.max_seconds:g} s used"
        return None

    def submit(self, messages: list[dict]) -> Future:
        """Send a chat request in the background; the future yields a Reply."""
        with self._lock:
            self.usage.requests += 1
        return self._pool.submit(self._complete, messages)

    def _complete(self, messages: list[dict]) -> Reply:
        import openai

        retryable = (openai.RateLimitError, openai.APITimeoutError, openai.APIConnectionError,
                     openai.InternalServerError)
        started = time.perf_counter()
        reason = ""
        for attempt in range(1, self.settings.retries + 2):
            try:
                response = self._client.chat.completions.create(
                    model=self.settings.model, messages=messages,
                    temperature=self.settings.temperature)
                choice = response.choices[0] if response.choices else None
                text = (choice.message.content or "") if choice is not None else ""
                usage = response.usage
                reply = Reply(bool(text.strip()), text,
                              "" if text.strip() else "the model answered with no content",
                              time.perf_counter() - started,
                              getattr(usage, "prompt_tokens", 0) or 0,
                              getattr(usage, "completion_tokens", 0) or 0, attempt)
                self._account(reply)
                return reply
            except retryable as exc:
                reason = f"{type(exc).__name__}: {exc}"
                if attempt <= self.settings.retries:
                    time.sleep(self.settings.backoff * 2 ** (attempt - 1))
            except (openai.APIError, ValueError, TypeError, AttributeError) as exc:
                reason = f"{type(exc).__name__}: {exc}"  # malformed answers, 4xx: no retry
                break
        reply = Reply(False, reason=reason, seconds=time.perf_counter() - started,
                      attempts=attempt)
        self._account(reply)
        return reply

    def _account(self, reply: Reply) -> None:
        with self._lock:
            self.usage.prompt_tokens += reply.prompt_tokens
            self.usage.completion_tokens += reply.completion_tokens
            self.usage.wait_seconds += reply.seconds
            self.usage.failures += 0 if reply.ok else 1

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()
