"""The project's evidence: results committed as data (``results/``), the docs' tables rendered from them, the GPU
and overhead goals they are judged by, and a collected study's claims decided again. The benchmark scripts beside
this package and the tests use it; the ``fairnas`` library never imports it."""
