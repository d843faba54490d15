"""The LLM judge: an OpenAI-compatible chat endpoint named by three environment variables.

``EVAL_LLM_JUDGE_BASE_URL`` (a URL not ending in ``/v1``, e.g. ``http://127.0.0.1:8000``, gets it),
``EVAL_LLM_JUDGE_NAME`` and, optionally, ``EVAL_LLM_JUDGE_API_KEY``. Only that key is sent,
and only to that host: requests go through the registry's ``openai`` engine
(:class:`benchcheck.engines.openai.client.OpenAIEngine`), given the key in its options (no other
variable is read), which follows no redirect.
Verdicts are cached by judge model, prompt version and item.

The judge is asked for a structured verdict (:mod:`benchcheck.qa.judge_prompt`): a JSON object,
sent with ``response_format: {"type": "json_object"}``; an endpoint that refuses that field
(a 400/422 naming ``response_format``) is asked for a final ``SCORE: <x>`` line instead, from
then on (``--judge-format auto``, the default; ``json`` or ``line`` fix the format). A reply
without a verdict is asked again, up to the judge's retry limit, then it is a judge error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from benchcheck.engines.base import Failure, GenerateRequest
from benchcheck.engines.capabilities import served_models
from benchcheck.engines.options import EngineOptions
from benchcheck.engines.registry import from_options
from benchcheck.masking import Masker
from benchcheck.qa.dataset import QAItem
from benchcheck.qa.errors import PreconditionError
from benchcheck.qa.judge_prompt import (
    JUDGE_PROMPT_VERSION,
    JUDGE_SYSTEM,
    ParsedScore,
    VerdictFormat,
    judge_prompt,
    parse_verdict,
)
from benchcheck.qa.records import Judgement
from benchcheck.qa.state import JudgeCache, judge_key
from benchcheck.qa.urls import service_base_url

ENV_BASE_URL = "EVAL_LLM_JUDGE_BASE_URL"
ENV_NAME = "EVAL_LLM_JUDGE_NAME"
ENV_API_KEY = "EVAL_LLM_JUDGE_API_KEY"
_MAX_IDS_SHOWN = 20
JudgeFormat = Literal["auto", "json", "line"]
JUDGE_FORMATS: tuple[JudgeFormat, ...] = ("auto", "json", "line")


@dataclass(frozen=True, slots=True)
class JudgeConfig:
    """Where the judge is and how it is asked. ``api_key`` never appears in ``repr``."""

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int = 1024
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 3
    verdict_format: JudgeFormat = "auto"

    @classmethod
    def from_env(cls, env: Mapping[str, str], **kwargs: Any) -> JudgeConfig:
        """Read the three variables; a missing or bad one is a :class:`PreconditionError`."""
        missing = [v for v in (ENV_BASE_URL, ENV_NAME) if not env.get(v, "").strip()]
        if missing:
            raise PreconditionError(
                f"judge not configured: set {' and '.join(missing)} (and {ENV_API_KEY} if the "
                "judge needs a key), or pass --skip-judge for latency only"
            )
        try:
            base = service_base_url(env[ENV_BASE_URL], ENV_BASE_URL)
        except ValueError as e:
            raise PreconditionError(str(e)) from None
        key = env.get(ENV_API_KEY, "").strip() or None
        return cls(base, env[ENV_NAME].strip(), key, **kwargs)

    def settings(self) -> dict[str, Any]:
        """For summary.json: where and what, never the key."""
        return {"judge_base_url": self.base_url, "judge_model_requested": self.model,
                "judge_prompt_version": JUDGE_PROMPT_VERSION, "judge_max_tokens": self.max_tokens,
                "judge_format": self.verdict_format, "judge_key_set": self.api_key is not None}


# How gateways word "no such model" in a 400 (OpenAI, LiteLLM, vLLM, NVIDIA API catalog).
_UNKNOWN_MODEL = ("invalid model", "model not found", "model_not_found", "unknown model", "does not exist",
                  "not a valid model", "unsupported model")


def _names_model(message: str, model: str) -> bool:
    """A 400 about the model id, not about the request (a context-length 400 says "model's")."""
    low = message.lower()
    return model.lower() in low or any(p in low for p in _UNKNOWN_MODEL)


def _names_missing_model(message: str, model: str) -> bool:
    """A 404 about the model id (vLLM: "The model `x` does not exist."), not a wrong path."""
    low = message.lower()
    return model.lower() in low or ("model" in low and any(p in low for p in _UNKNOWN_MODEL))


def refusal_hint(judgements: Sequence[Judgement], config: JudgeConfig, model_ids: Sequence[str] | None) -> str | None:
    """The hint for a judge that refused every item with 403, or 400 or 404 naming the model
    (vLLM and most gateways answer an unknown model id with 404): the id is probably not what
    this gateway calls the model."""
    def refused(j: Judgement) -> bool:
        if j.status != "error":
            return False
        message = j.error or ""
        return (j.http_status == 403
                or (j.http_status == 400 and _names_model(message, config.model))
                or (j.http_status == 404 and _names_missing_model(message, config.model)))

    if judgements and all(j.status == "error" and j.http_status == 401 for j in judgements):
        # Not the model id: the gateway did not take the key, and a list of ids would be refused too.
        given = f"the key in {ENV_API_KEY} was not accepted" if config.api_key else f"{ENV_API_KEY} is not set"
        return (f"the judge refused every item (HTTP 401): {given}; set it to a key this gateway takes. "
                "The VLM answers are kept; rerun `benchcheck qa judge`.")
    if not judgements or not all(refused(j) for j in judgements):
        return None
    codes = "/".join(sorted({str(j.http_status) for j in judgements}))
    hint = (f"the judge refused every item (HTTP {codes}): {config.model!r} is probably not what this "
            f"gateway calls the model; GET {config.base_url}/models lists the ids this key can use; copy "
            f"one verbatim into {ENV_NAME}. The VLM answers are kept; rerun `benchcheck qa judge`.")
    if model_ids:
        shown = ", ".join(model_ids[:_MAX_IDS_SHOWN]) + (" ..." if len(model_ids) > _MAX_IDS_SHOWN else "")
        hint += f" Ids listed now: {shown}"
    return hint


def _refuses_json_mode(f: Failure) -> bool:
    """A 400/422 that names the JSON-mode field: the endpoint does not support it."""
    low = f.message.lower()
    return f.status in (400, 422) and ("response_format" in low or "json_object" in low)


class Judge:
    """Scores answers against references through the judge engine, with the cache in front."""

    def __init__(self, config: JudgeConfig, cache: JudgeCache, redactor: Masker) -> None:
        self.config = config
        self.cache = cache
        self.redactor = redactor
        self._hits = cache.load()
        self.cache_hits = 0
        self.format: VerdictFormat = "line" if config.verdict_format == "line" else "json"
        # Through the registry like every engine; the key rides in the options (repr-hidden), never in a log.
        self.engine = from_options("openai", EngineOptions(
            model=config.model, endpoints=(config.base_url,), api_key=config.api_key, workers=config.concurrency,
            timeout_s=config.timeout_s, max_retries=config.max_retries))

    def key(self, item: QAItem, answer: str) -> str:
        return judge_key(self.config.model, JUDGE_PROMPT_VERSION, item, answer, self.redactor)

    async def judge(self, item: QAItem, answer: str) -> Judgement:
        """One verdict: from the cache, or asked now and appended to the cache."""
        key = self.key(item, answer)
        hit = self._hits.get(key)
        if hit is not None:
            self.cache_hits += 1
            return hit
        try:
            verdict = await self._ask(item, answer)
        except Exception as e:  # a bug or an OS error costs one item's verdict, never the run
            verdict = Judgement(item.id, "error", error=self.redactor.text(f"internal: {type(e).__name__}: {e}"))
        self.cache.append(key, verdict)
        if verdict.status == "ok":
            self._hits[key] = verdict
        return verdict

    async def _ask(self, item: QAItem, answer: str) -> Judgement:
        """Ask until a reply holds a verdict: ``max_retries`` more times after the first."""
        parsed: ParsedScore | None = None
        model: str | None = None
        replies = 0
        while replies <= self.config.max_retries:
            fmt = self.format
            (res,) = await self.engine.generate([self._request(item, answer, fmt)])
            if isinstance(res, Failure):
                if fmt == "json" and self.config.verdict_format == "auto" and _refuses_json_mode(res):
                    self.format = "line"  # this endpoint has no JSON mode: every later item asks for a line
                    continue
                return Judgement(item.id, "error", error=self.redactor.text(str(res)), http_status=res.status)
            replies += 1
            model = res.model or None
            parsed = parse_verdict(res.text)
            if parsed.score is not None:
                return Judgement(item.id, "ok", score=parsed.score, reasoning=self.redactor.text(parsed.reasoning),
                                 judge_model=model)
        assert parsed is not None
        error = f"no verdict in {replies} replies; the last: {parsed.error}"
        return Judgement(item.id, "error", reasoning=self.redactor.text(parsed.reasoning), judge_model=model,
                         error=self.redactor.text(error))

    def _request(self, item: QAItem, answer: str, fmt: VerdictFormat) -> GenerateRequest:
        # An answer that echoes a secret from the environment must not carry it to the judge host.
        prompt = self.redactor.text(judge_prompt(item.question, item.ground_truth, answer, fmt))
        return GenerateRequest(request_id=item.id, prompt=prompt, max_tokens=self.config.max_tokens,
                               system=JUDGE_SYSTEM, response_format="json_object" if fmt == "json" else None)

    async def judge_all(self, pairs: Sequence[tuple[QAItem, str]]) -> list[Judgement]:
        """Verdicts in input order; each is cached as soon as it arrives."""
        return list(await asyncio.gather(*(self.judge(i, a) for i, a in pairs)))

    async def model_ids(self) -> list[str]:
        """The judge's ``GET <base-url>/models`` ids (empty when the listing fails)."""
        listed = await served_models(self.engine)
        return listed.get(self.config.base_url, [])

    async def aclose(self) -> None:
        await self.engine.aclose()
