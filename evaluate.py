"""Transfer-evaluate trained runs: ``python evaluate.py ckpt=<run>/checkpoints/last.ckpt [overrides]``."""

from fairnas.tasks.evaluate import main

if __name__ == "__main__":
    main()
