"""Shortcuts a model can learn from the text alone, and answers that look mislabelled.

``benchcheck probe`` (docs/probe.md): per benchmark, a k-fold text-only probe (features ->
folds grouped by video -> logistic regression -> out-of-fold probabilities), its permutation
tests, Iterative Bias Pruning and the blind gain over step 1; and the label-error flags.
"""

from benchcheck.probe.embeddings import EmbeddingCache, embed, text_key
from benchcheck.probe.flags import FLAG_AGREE, FLAG_MARGIN, LabelFlag, label_flags
from benchcheck.probe.pipeline import ProbeRun, probe_pool
from benchcheck.probe.run import ProbeConfig, ProbeResult, TextEmbedder, run_probe

__all__ = ["FLAG_AGREE", "FLAG_MARGIN", "EmbeddingCache", "LabelFlag", "ProbeConfig", "ProbeResult", "ProbeRun",
           "TextEmbedder", "embed", "label_flags", "probe_pool", "run_probe", "text_key"]
