"""``python -m benchcheck`` runs the command line."""

from benchcheck.cli import main

main()
