"""How step 0 (dedup)'s outcome reads to every later stage.

``scope`` words a benchmark the dedup run never read ("not deduplicated"), and ``probe_stamp``
records which step-0 outcome a probe folder was made with, so a reader shows a probe only beside
its own step 0. Assemble, the audit, the probe, export and the report read both; a layer below the
tasks, with nothing above the shared file helpers (docs/ARCHITECTURE.md, "Layers").
"""
