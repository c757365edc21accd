"""Audit a trained run: ``python audit.py ckpt=<run>/checkpoints/last.ckpt [audits=[ood,...]] [overrides]``."""

from fairnas.tasks.audit import main

if __name__ == "__main__":
    main()
