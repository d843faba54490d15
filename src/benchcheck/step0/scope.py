"""How every reader of a step-0 outcome words a benchmark its dedup run never read.

A dedup run reads the benchmarks it is given; a kept list (or ``step0_removed.jsonl`` beside it)
covers only those (``report.source.Step0.deduplicated``, over ``screen.plan.KeptList.covered``).
Step 0 decided nothing of another benchmark: it is not deduplicated, never "looked at, 0 removed".
``report``, ``probe``, ``audit`` and ``export`` say so in the one sentence made here, so a reader
who meets it in one place recognises it in the others.
"""

from __future__ import annotations

from collections.abc import Mapping

NOT_DEDUPLICATED = "not deduplicated"

# what happened to such a benchmark after step 0, as the chain (and every reader of its rows) saw it
CHAIN_SCREENED = "the chain screened {it} whole, as screen --keep does"


def not_deduplicated_note(counts: Mapping[str, int], then: str = CHAIN_SCREENED) -> str:
    """One sentence naming each benchmark of ``counts`` (benchmark -> its items the reader read)
    that the dedup run behind ``--step0`` never read; ``then`` (``{it}``: it or them) says what the
    reader did with them."""
    names = ", ".join(f"{b} ({n} item{'s' * (n != 1)})" for b, n in sorted(counts.items()))
    it = "it" if len(counts) == 1 else "them"
    return (f"Not deduplicated: {names}. The dedup run behind --step0 never read {it}, so step 0 decided nothing "
            f"of {it} and {then.format(it=it)}.")
