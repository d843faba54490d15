"""The sweep's engine from CLI options (through the engine registry) and the context precondition:
can the engine hold the budget?"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

from benchcheck.defaults import SWEEP_MAX_MODEL_LEN, SWEEP_WORKERS_PER_ENDPOINT
from benchcheck.direct_http import open_direct
from benchcheck.engines import Engine
from benchcheck.engines.capabilities import max_model_len
from benchcheck.engines.options import EngineFlags, EngineOptions
from benchcheck.engines.registry import RULE_PROGRAMS, from_options
from benchcheck.spec import ModelRef
from benchcheck.sweep.conditions import MAX_TOKENS, SWEEP_MODEL
from benchcheck.video.plans import TOKEN_BUDGET

MIN_CONTEXT = SWEEP_MAX_MODEL_LEN  # seed 001: stop and report when a server cannot serve this many tokens

DEFAULT_WORKERS_PER_ENDPOINT = SWEEP_WORKERS_PER_ENDPOINT


@dataclass(frozen=True, slots=True)
class SweepEngine(EngineFlags):
    """Which registered engine the sweep runs on, the CLI's flags for it (``EngineFlags``: picklable,
    no secret, so the Ray executor sends it to its engine actors as the recipe) and its concurrency."""

    concurrency: int = 32


def model_ref(o: SweepEngine) -> ModelRef:
    """The sweep's pinned 8B unless another model is given (a given hub name keeps a given revision);
    a rule program's own label and rule version (built here: it loads nothing), so its rows are
    stale to a model's run into the same folder instead of done."""
    if o.engine in RULE_PROGRAMS:
        rules = from_options(o.engine, o.options(o.concurrency))
        return ModelRef(rules.model_name, rules.revision)
    if o.model is None or o.model == SWEEP_MODEL.name:
        return ModelRef(SWEEP_MODEL.name, o.revision or SWEEP_MODEL.revision)
    return ModelRef(o.model, o.revision)


def engine_options(o: SweepEngine) -> EngineOptions:
    """The registry's common options for the sweep's engine (the sweep's model by default)."""
    ref = model_ref(o)
    return o.options(o.concurrency, model=ref.name, revision=ref.revision)


def build_sweep_engine(o: SweepEngine) -> Engine:
    """The registered engine the options name (``EngineOptionError``/``ValueError`` for a usage error)."""
    return from_options(o.engine, engine_options(o))


def endpoint_context(url: str, api_key: str | None, timeout: float = 10.0) -> tuple[int | None, str | None]:
    """``(max_model_len, None)`` as an OpenAI-compatible server (vLLM, benchcheck serve) reports it in
    ``/models``, or ``(None, why)``: the precondition names the cause (a wrong port, a refused key)
    instead of suggesting a server setting that would not help. The key goes to ``url``'s host only:
    a redirect is followed without it, and no proxy of the environment is used."""
    base = url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    where = f"{base}/models"
    req = urllib.request.Request(where)
    if api_key:
        req.add_unredirected_header("Authorization", f"Bearer {api_key}")
    try:
        with open_direct(req, timeout=timeout) as r:
            data = json.loads(r.read())
    except urllib.error.HTTPError as e:
        key = "; check the key --api-key-env names" if e.code in (401, 403) else ""
        return None, f"{where} answered HTTP {e.code} {e.reason}{key}"
    except urllib.error.URLError as e:
        return None, f"{where} cannot be reached ({e.reason}); check --endpoint"
    except (OSError, ValueError) as e:
        return None, f"{where} gave no model list ({type(e).__name__}: {e})"
    models = data.get("data") if isinstance(data, dict) else None
    lens = [m.get("max_model_len") for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    known = [int(v) for v in lens if isinstance(v, int)]
    if not known:
        return None, f"{where} reports no max_model_len"
    return min(known), None


def engine_context(engine: Engine, o: SweepEngine) -> tuple[int | None, str | None]:
    """What the engine can hold (its own capability, or the smallest its endpoints report), or
    ``(None, why)`` naming the first endpoint that did not tell."""
    own = max_model_len(engine)
    if own is not None:
        return own, None
    if not o.endpoints:
        return None, None
    lens: list[int] = []
    for u in o.endpoints:
        n, why = endpoint_context(u, o.api_key())
        if n is None:
            return None, why
        lens.append(n)
    return min(lens), None


def check_context(known: int | None, declared: int | None, needs_budget: bool,
                  budget: int = TOKEN_BUDGET, max_tokens: int = MAX_TOKENS,
                  min_context: int = MIN_CONTEXT, why: str | None = None) -> str | None:
    """None when the context holds ``budget + max_tokens`` and ``min_context``; else the message to stop with.

    The budget is never lowered to fit: a smaller context would silently change the fps ladders.
    ``min_context`` is seed 001's rule (stop when a server cannot serve 65,536 tokens); only an
    explicit ``--min-context`` lowers it, never below what the budget needs. ``why``: why the
    engine did not tell its context (``engine_context``), named first when it is unknown.
    """
    if not needs_budget:
        return None
    need = budget + max_tokens
    have = known if known is not None else declared
    if have is None and why:
        return (f"cannot tell the engine's max model length: {why}. The sweep needs {need:,} tokens "
                f"(--token-budget {budget} + max_tokens {max_tokens}); a server that cannot report it is "
                "declared with --max-model-len N")
    if have is None:
        return (f"cannot tell the engine's max model length; the sweep needs {need:,} tokens "
                f"(--token-budget {budget} + max_tokens {max_tokens}). Serve with --max-model-len 65536 "
                "(benchcheck launch --sweep does) or declare it with --max-model-len N")
    if have < need:
        return (f"the engine's max model length is {have:,} tokens < {need:,} (--token-budget {budget} + "
                f"max_tokens {max_tokens}); serve with --max-model-len 65536. The budget is never lowered: "
                "a smaller context would silently change the fps ladders")
    if have < min_context:
        return (f"the engine's max model length is {have:,} tokens < {min_context:,}: the protocol's servers "
                f"serve {MIN_CONTEXT:,} (--max-model-len {MIN_CONTEXT}) and a machine that cannot is to be "
                "reported, not run (docs/sweep.md, 'Running'). Serve with --max-model-len 65536, or accept this "
                f"context explicitly with --min-context {have} (recorded in logs/runner.log)")
    return None


def endpoints_list(values: Sequence[str]) -> tuple[str, ...]:
    """``--endpoint`` values, each possibly comma-separated."""
    return tuple(u.strip() for v in values for u in v.split(",") if u.strip())
