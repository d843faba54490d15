"""Executors beside the local runner: Ray (``ray_pipeline`` generic, ``ray_screen`` for screening)."""
