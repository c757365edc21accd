"""Train one face-identification model: ``python train.py [hydra overrides]`` (see README)."""

from fairnas.tasks.train import main

if __name__ == "__main__":
    main()
