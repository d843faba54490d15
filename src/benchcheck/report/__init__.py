"""The audit report a person reads (static HTML site with plots and an item browser) and the
exports of the cleaned benchmark for lmms-eval, VLMEvalKit and Hugging Face datasets."""

from benchcheck.report.site import Built, ReportOptions, build_report

__all__ = ["Built", "ReportOptions", "build_report"]
