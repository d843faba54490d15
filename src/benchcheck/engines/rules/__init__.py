"""Engines that answer by rules, without a model: scripted answers and the reference engines."""
