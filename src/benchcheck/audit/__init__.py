"""How far to trust each removal: evidence beside the protocol's decisions (docs/audit.md).

Pure functions over recorded rows (no new forwards): the letter prior and what it explains, a
permutation null of the removal rule, per-item confidence, threshold sensitivity, cross-model
agreement and a shortcut profile per benchmark. Rows are read in one place
(``benchcheck.stats.source``), with the estimators the pool shares (``benchcheck.stats``).
"""

from benchcheck.audit.run import AuditResult, audit_forwards, count_step0, run_audit
from benchcheck.stats.source import Forwards, read_forwards

__all__ = ["AuditResult", "Forwards", "audit_forwards", "count_step0", "read_forwards", "run_audit"]
