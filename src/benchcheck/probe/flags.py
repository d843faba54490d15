"""Label-error flags (pure): items on which the sources that see the most agree on one option
that is not the gold, each with a margin above a threshold.

A flag is a question for a person, never a removal: the gold may be right and every model wrong
in the same way. Sources are the screening steps that show the question with the most frames
(``evidence.FLAG_STEPS``) and the text-only probe; each gives a pick and its margin in nats (a
step: the log-prob gap to the runner-up; the probe: the log of its probability ratio). An item
is flagged when at least ``min_agree`` sources pick the same non-gold option with margins above
``margin``, counted net of the sources that pick the gold with a margin above it (a text-only
probe that has learnt a pattern may back a wrong gold: one dissent does not veto three steps
that saw the clip, but two guesses against one sure gold do not flag). Flags are ranked by that
net agreement, then by the agreeing sources' smallest margin.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchcheck.probe.evidence import Pick
from benchcheck.protocol import LETTERS

# A source's pick counts above this margin (nats): on the planted-error construction with a letter
# prior, log 2 let two guessers agreeing on the favoured letter through (docs/probe.md has the table).
FLAG_MARGIN = 1.0
FLAG_AGREE = 2


def sources_needed(min_agree: int = FLAG_AGREE) -> int:
    """Sources an item needs for a flag to be possible: ``min_agree``, and never fewer than two
    (one source alone is a disagreement with the gold, not a flag)."""
    return max(min_agree, 2)


def no_flags_reason(sources: Sequence[str], min_agree: int = FLAG_AGREE) -> str:
    """Why no flags were made from these ``sources``: the one line the command prints."""
    steps = [s for s in sources if s != "probe"]
    hint = "" if steps else "; pass --results with steps 3, 5 or 6"
    return (f"label flags: none made: {len(sources)} source(s) ({', '.join(sources) or 'none'}), "
            f"flags need {sources_needed(min_agree)} (--flag-agree {min_agree}){hint}")


@dataclass(frozen=True, slots=True)
class LabelFlag:
    item_id: str
    bench: str
    gold: int
    option: int  # the option the sources agree on
    agree: int  # sources picking it above the margin
    sources: int  # sources with evidence on the item
    against: int  # sources picking the gold above the margin
    min_margin: float
    evidence: tuple[Pick, ...]

    def evidence_text(self) -> str:
        return "; ".join(f"{p.source}: {LETTERS[p.option]} {p.margin:.2f}" for p in self.evidence)

    def record(self, rank: int) -> dict[str, object]:
        return {"rank": rank, "item_id": self.item_id, "bench": self.bench, "gold": LETTERS[self.gold],
                "flagged_option": LETTERS[self.option], "agree": self.agree, "sources": self.sources,
                "for_gold": self.against,
                "min_margin": round(self.min_margin, 4), "evidence": self.evidence_text()}


def label_flags(golds: Mapping[str, tuple[str, int]], sources: Sequence[Mapping[str, Pick]],
                margin: float = FLAG_MARGIN, min_agree: int = FLAG_AGREE) -> list[LabelFlag]:
    """``golds``: item id -> (bench, gold index); ``sources``: each source's item id -> pick."""
    out = []
    for item_id, (bench, gold) in golds.items():
        picks = [s[item_id] for s in sources if item_id in s]
        sure = [p for p in picks if p.margin > margin]
        for_gold = sum(p.option == gold for p in sure)
        votes: dict[int, list[Pick]] = {}
        for p in sure:
            if p.option != gold:
                votes.setdefault(p.option, []).append(p)
        if not votes:
            continue
        option, agreeing = max(votes.items(), key=lambda kv: (len(kv[1]), min(p.margin for p in kv[1])))
        if len(agreeing) - for_gold >= min_agree:
            out.append(LabelFlag(item_id, bench, gold, option, len(agreeing), len(picks), for_gold,
                                 min(p.margin for p in agreeing), tuple(picks)))
    out.sort(key=lambda f: (-(f.agree - f.against), -f.min_margin, f.item_id))
    return out


@dataclass(frozen=True, slots=True)
class FlagCheck:
    planted: int
    flagged: int
    true_flags: int

    @property
    def precision(self) -> float | None:
        return self.true_flags / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        return self.true_flags / self.planted if self.planted else None


def check_flags(flags: Sequence[LabelFlag], wrong: set[str]) -> FlagCheck:
    """Flags against the planted wrong golds."""
    ids = {f.item_id for f in flags}
    return FlagCheck(len(wrong), len(ids), len(ids & wrong))
