"""Audit a trained run for robustness bias: ``python audit.py ckpt=<run>/checkpoints/last.ckpt [overrides]``."""

from fairnas.tasks.audit import main

if __name__ == "__main__":
    main()
