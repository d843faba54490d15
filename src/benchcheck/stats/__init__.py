"""The statistics that both the assembled pool (``screen.assemble``) and the audit read.

The forwards behind each decision (``source``), how firmly each decision stands (``confidence``,
``pool``), intervals clustered by video (``cluster``), the normal tails (``normal``), how a
number is rounded into a CSV cell (``cells``); step 0's wording and probe stamp live in
``step0``. A layer below the tasks, so screening writes the pool's ``confidence`` and
``removal_lo`` / ``removal_hi`` with the same rules the audit reports, without importing the audit
(docs/ARCHITECTURE.md, "Layers").
"""
