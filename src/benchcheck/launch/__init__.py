"""Running at scale: one inference server per GPU on a host, Slurm job arrays."""
