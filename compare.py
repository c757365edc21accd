"""Compare bias mitigations across models (thesis Tables 4.4/4.6): ``python compare.py [hydra overrides]``."""

from fairnas.tasks.compare import main

if __name__ == "__main__":
    main()
