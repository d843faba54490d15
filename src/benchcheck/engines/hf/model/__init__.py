"""The only code that touches transformers' Qwen3-VL classes: the fast forwards installed on one
model instance, and the checked install step."""
