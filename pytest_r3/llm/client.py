"""Talking to any OpenAI-compatible chat-completions endpoint, within a budget.

Retries are the openai client's own, bounded by ``retries`` (it retries 408, 409, 429, 5xx,
timeouts and connection errors with backoff, and honours ``Retry-After``). ``timeout`` is a
total deadline per request, retries and waits included: a transport under the client caps
every phase's timeout at the time left, refuses a retry whose ``Retry-After`` ends past the
deadline, and shuts the socket at the deadline, so a server that trickles bytes cannot hold a
request longer.

A failed request is returned as a failed Reply with a ``cause`` and a one-line ``reason``,
never raised. Failures only the user can fix (no key, a refused key, an unknown model, a
parameter the model rejects, an endpoint that cannot be reached) are fatal: the client sends
nothing more (``fatal``), and the reason says which setting to change.

Over 300 lines on purpose: the settings, the deadline transport and the explanation of each
failure are one concern (what is sent to the endpoint, and what to tell the user when it
fails); the transport (``_Call`` to ``_shut``) is the part to move out if it grows.
"""

from __future__ import annotations

import email.utils
import ipaddress
import os
import re
import socket
import threading
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlparse

try:  # the transport layer of the installed openai client
    import httpx2 as httpx
except ImportError:  # pragma: no cover - openai releases built on httpx
    import httpx

DEFAULT_ENDPOINT = "https://api.openai.com/v1"
NO_KEY = ("", "none")     # values of api_key_env meaning "this local server needs no key"
FATAL_CAUSES = ("auth", "not_found", "bad_request")
MAX_RETRIES = 10


class LLMSetupError(ValueError):
    """The model endpoint cannot be used as configured (one line: what to change)."""


@dataclass(frozen=True)
class LLMSettings:
    model: str
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"   # "" or "none": no key (loopback endpoints only)
    temperature: float | None = 0.7       # None: not sent (the model's default)
    timeout: float = 120.0                # total seconds per request, retries included
    concurrency: int = 2
    max_requests: int = 40
    max_tokens: int = 400_000       # prompt + completion tokens over the run
    max_seconds: float = 1800.0
    retries: int = 2                # the openai client's max_retries
    max_answer_tokens: int | None = None  # sent as max_tokens; None: the server's default

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError("the model name is empty (--r3-llm-model)")
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"--r3-llm-temperature {self.temperature:g}: use 0 to 2, or "
                             "none to leave it out")
        if not self.timeout > 0:
            raise ValueError(f"--r3-llm-timeout {self.timeout:g}: must be above 0 seconds")
        if not 0 <= self.retries <= MAX_RETRIES:
            raise ValueError(f"retries {self.retries}: use 0 to {MAX_RETRIES}")
        if self.concurrency < 1:
            raise ValueError(f"--r3-llm-concurrency {self.concurrency}: must be 1 or more")
        if self.max_answer_tokens is not None and self.max_answer_tokens < 1:
            raise ValueError(f"max answer tokens {self.max_answer_tokens}: must be 1 or more")

    @property
    def endpoint(self) -> str:
        """The URL requests go to (the openai client's own choice when none is given)."""
        return (self.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_ENDPOINT) \
            .rstrip("/")

    def api_key(self) -> str | None:
        """The key to send; None where the user said a local server needs none.

        Raises LLMSetupError, naming the variable, when no key can be sent: call it before
        anything is sent (the plugin does, before any test runs)."""
        name = self.api_key_env.strip()
        if name.lower() in NO_KEY:
            if is_loopback(self.endpoint):
                return None
            raise LLMSetupError(
                f"--r3-llm-api-key-env {name or repr(name)} (no key) is only for a local "
                f"endpoint (localhost, 127.0.0.1, ::1); {self.endpoint} needs a key: name "
                "the environment variable that holds it with --r3-llm-api-key-env")
        key = os.environ.get(name, "").strip()
        if not key:
            raise LLMSetupError(
                f"${name} is not set: export the API key for {self.endpoint} in it, or name "
                "another variable with --r3-llm-api-key-env (a local server that needs no "
                "key: --r3-llm-api-key-env none)")
        return key


def is_loopback(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Reply:
    ok: bool
    text: str = ""
    reason: str = ""
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    cause: str = ""        # why not ok: auth, not_found, bad_request, rate_limited, timeout,
                           # connection, server_error, context_too_long, malformed, empty,
                           # truncated; "not_sent" after a fatal failure
    fatal: bool = False    # only the user can fix it: nothing more is sent
    finish_reason: str = ""


@dataclass
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    answers: int = 0
    wait_seconds: float = 0.0
    started: float = field(default_factory=time.perf_counter)


def _one_line(text: object, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


# -- the total deadline: a transport under the openai client --------------------------------
@dataclass
class _Call:
    deadline: float           # time.monotonic()
    attempts: int = 0
    note: str = ""            # what the transport decided (a refused Retry-After)


def _retry_after(headers) -> float | None:
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) * scale
        except ValueError:
            parsed = email.utils.parsedate_tz(value)
            if parsed is not None:
                return email.utils.mktime_tz(parsed) - time.time()
    return None


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, inner, call: _Call, request, timer: threading.Timer) -> None:
        self._inner, self._call, self._request, self._timer = inner, call, request, timer

    def __iter__(self):
        try:
            for chunk in self._inner:
                if time.monotonic() >= self._call.deadline:
                    raise _DeadlineTransport.expired(self._request)
                yield chunk
        except (httpx.TransportError, OSError, ValueError) as exc:
            if time.monotonic() >= self._call.deadline - 0.05:  # cut by the watchdog
                raise _DeadlineTransport.expired(self._request) from exc
            raise

    def close(self) -> None:
        self._timer.cancel()
        self._inner.close()


class _DeadlineTransport(httpx.BaseTransport):
    def __init__(self, inner, calls: threading.local, send_key: bool) -> None:
        self._inner, self._calls, self._send_key = inner, calls, send_key

    @staticmethod
    def expired(request):
        import openai

        return openai.APITimeoutError(request=request)  # an OpenAIError: never retried

    def handle_request(self, request):
        if not self._send_key:
            request.headers.pop("Authorization", None)
        call: _Call | None = getattr(self._calls, "current", None)
        if call is None:
            return self._inner.handle_request(request)
        call.attempts += 1
        left = call.deadline - time.monotonic()
        if left <= 0:
            raise self.expired(request)
        phases = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {
            phase: left if phases.get(phase) is None else min(phases[phase], left)
            for phase in ("connect", "read", "write", "pool")}
        try:
            response = self._inner.handle_request(request)
        except httpx.TransportError as exc:
            if time.monotonic() >= call.deadline - 0.05:
                raise self.expired(request) from exc
            raise
        wait = _retry_after(response.headers)
        left = call.deadline - time.monotonic()
        retryable = response.status_code in (408, 409, 429) or response.status_code >= 500
        if retryable and wait is not None and wait > left:
            response.headers["x-should-retry"] = "false"  # the client obeys this header
            call.note = f"the server asked to wait {wait:g} s, past the deadline"
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        timer = threading.Timer(max(0.0, left), _shut, (sock,))
        timer.daemon = True
        timer.start()
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=_DeadlineStream(response.stream, call, request, timer),
                              extensions=response.extensions)

    def close(self) -> None:
        self._inner.close()


def _http_transport(endpoint: str):
    """The plain transport, through the proxy the environment names for ``endpoint``
    (``HTTPS_PROXY``, ``NO_PROXY``...): a client given a transport ignores those itself."""
    url = urlparse(endpoint)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if proxy and not is_loopback(endpoint) and not urllib.request.proxy_bypass(url.hostname
                                                                               or ""):
        return httpx.HTTPTransport(proxy=proxy)
    return httpx.HTTPTransport()


def _shut(sock) -> None:
    """At the deadline: wake the blocked read (a plain ``shutdown``, TLS sockets too)."""
    if sock is not None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except (OSError, TypeError):
            pass


# -- the client -------------------------------------------------------------------------------
class LLMClient:
    def __init__(self, settings: LLMSettings) -> None:
        import openai

        self.settings = settings
        self.endpoint = settings.endpoint
        self.fatal: str | None = None  # set: nothing more is sent, and this says why
        try:
            api_key = settings.api_key()
        except LLMSetupError as exc:
            api_key, self.fatal = None, str(exc)
        self._calls = threading.local()
        transport = _DeadlineTransport(_http_transport(self.endpoint), self._calls,
                                       api_key is not None)
        self._client = openai.OpenAI(
            base_url=self.endpoint, api_key=api_key or "unused", timeout=settings.timeout,
            max_retries=settings.retries,
            http_client=openai.DefaultHttpxClient(transport=transport))
        self._pool = ThreadPoolExecutor(max_workers=settings.concurrency,
                                        thread_name_prefix="r3-llm")
        self._lock = threading.Lock()
        self._unreachable = 0  # connection failures in a row, before any answer
        self.usage = Usage()

    @property
    def identity(self) -> dict:
        """What, besides the messages, decides an answer (the run log's cache key)."""
        return {"endpoint": self.endpoint, "model": self.settings.model,
                "temperature": self.settings.temperature}

    def budget_left(self) -> str | None:
        """None while requests may still be made, else why not."""
        usage, settings = self.usage, self.settings
        if self.fatal:
            return self.fatal
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

        if self.fatal:
            return Reply(False, reason=f"not sent: {self.fatal}", cause="not_sent")
        started = time.monotonic()
        call = _Call(started + self.settings.timeout)
        self._calls.current = call
        try:
            response = self._client.chat.completions.create(**self._request(messages))
            reply = self._read(response)
        except (openai.OpenAIError, ValueError, TypeError, AttributeError, KeyError,
                IndexError) as exc:
            reply = self._failure(exc, call)
        finally:
            self._calls.current = None
        reply.seconds, reply.attempts = time.monotonic() - started, call.attempts
        self._account(reply)
        return reply

    def _request(self, messages: list[dict]) -> dict:
        request = {"model": self.settings.model, "messages": messages}
        if self.settings.temperature is not None:
            request["temperature"] = self.settings.temperature
        if self.settings.max_answer_tokens is not None:
            request["max_tokens"] = self.settings.max_answer_tokens
        return request

    def _read(self, response) -> Reply:
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        finish = (getattr(choice, "finish_reason", None) or "") if choice is not None else ""
        usage = response.usage
        tokens = (getattr(usage, "prompt_tokens", 0) or 0,
                  getattr(usage, "completion_tokens", 0) or 0)
        if finish == "length":
            limit = self.settings.max_answer_tokens
            reason = (f"the answer was cut at max_tokens={limit} (finish_reason=length); "
                      "raise --r3-llm-max-answer-tokens" if limit is not None else
                      f"the answer was cut by the server's output limit after {tokens[1]} "
                      "tokens (finish_reason=length); set --r3-llm-max-answer-tokens above "
                      "that, or raise the server's limit")
            return Reply(False, text, reason, 0.0, *tokens, cause="truncated",
                         finish_reason=finish)
        if not text.strip():
            return Reply(False, "", f"the model answered with no content (finish_reason="
                         f"{finish or 'none'})", 0.0, *tokens, cause="empty",
                         finish_reason=finish)
        return Reply(True, text, "", 0.0, *tokens, finish_reason=finish)

    def _failure(self, exc: Exception, call: _Call) -> Reply:
        import openai

        note = f"; {call.note}" if call.note else ""
        if isinstance(exc, openai.APITimeoutError):
            return Reply(False, reason=f"Timeout: no complete answer within the "
                         f"{self.settings.timeout:g} s deadline (--r3-llm-timeout){note}",
                         cause="timeout")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return Reply(False, reason=f"cannot reach {self.endpoint} ({_one_line(cause, 120)})"
                         ": is the server running? check --r3-llm-base-url",
                         cause="connection")
        if isinstance(exc, openai.APIStatusError):
            return self._status_failure(exc, f"after {call.attempts} attempt(s){note}")
        return Reply(False, reason=f"the answer is not a chat completion "
                     f"({type(exc).__name__}: {_one_line(exc, 120)})", cause="malformed")

    def _status_failure(self, exc, tried: str) -> Reply:
        status, settings = exc.status_code, self.settings
        body = exc.body
        message = _one_line(body.get("message") if isinstance(body, dict)
                            and body.get("message") else body or exc.message)
        said = f"HTTP {status}: {message}"
        if status in (401, 403):
            where = ("needs a key: name the variable holding it with --r3-llm-api-key-env"
                     if self.fatal is None and settings.api_key_env.strip().lower() in NO_KEY
                     else f"refused the key in ${settings.api_key_env.strip()}: put a valid "
                          "key there, or name another variable with --r3-llm-api-key-env")
            return Reply(False, reason=f"{self.endpoint} {where} ({said})", cause="auth",
                         fatal=True)
        if status == 404:
            return Reply(False, reason=f"model {settings.model!r} not found at {self.endpoint}"
                         f" ({said}): check --r3-llm-model and --r3-llm-base-url",
                         cause="not_found", fatal=True)
        if status == 429:
            if getattr(exc, "code", None) == "insufficient_quota":
                return Reply(False, reason=f"no quota left for the key in "
                             f"${settings.api_key_env} ({said})", cause="rate_limited",
                             fatal=True)
            return Reply(False, reason=f"rate limited ({said}) {tried}: lower "
                         "--r3-llm-concurrency", cause="rate_limited")
        if status >= 500 or status in (408, 409):
            return Reply(False, reason=f"the endpoint failed ({said}) {tried}",
                         cause="server_error")
        if getattr(exc, "code", None) == "context_length_exceeded" or re.search(
                r"context.(length|window)|maximum context|too many tokens|prompt is too long",
                message, re.IGNORECASE):
            return Reply(False, reason=f"the conversation is too long for the model ({said})",
                         cause="context_too_long")
        return Reply(False, reason=f"{self.endpoint} rejected the request ({said})"
                     + _parameter_hint(exc, message, settings), cause="bad_request",
                     fatal=True)

    def _account(self, reply: Reply) -> None:
        with self._lock:
            self.usage.prompt_tokens += reply.prompt_tokens
            self.usage.completion_tokens += reply.completion_tokens
            self.usage.wait_seconds += reply.seconds
            self.usage.failures += 0 if reply.ok else 1
            self.usage.answers += 1 if reply.ok else 0
            self._unreachable = self._unreachable + 1 if reply.cause == "connection" else 0
            if self._unreachable >= 3 and self.usage.answers == 0:
                reply.fatal = True  # three requests in a row, each retried, none got through
            if reply.fatal and self.fatal is None:
                self.fatal = reply.reason

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()


_PARAMETER_HINTS = {
    "temperature": "the model does not accept temperature={value}: set --r3-llm-temperature "
                   "to a value it accepts, or to none so that it is not sent",
    "max_tokens": "the model does not accept max_tokens={value}: set "
                  "--r3-llm-max-answer-tokens 0 so that it is not sent",
    "model": "check the model name (--r3-llm-model)",
}


def _parameter_hint(exc, message: str, settings: LLMSettings) -> str:
    param = getattr(exc, "param", None)
    if param not in _PARAMETER_HINTS:
        param = next((name for name in _PARAMETER_HINTS
                      if re.search(rf"\b{name}\b", message)), None)
    if param is None:
        return ""
    value = {"temperature": settings.temperature, "max_tokens": settings.max_answer_tokens,
             "model": settings.model}[param]
    return "; " + _PARAMETER_HINTS[param].format(value=value)
