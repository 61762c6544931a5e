"""The suspect-translation score: each translation's components (``components``), their batched computation over a
corpus (``batch``), the decodes and scoring of a corpus (``corpus``), the verdict (``rule``), the ranking
(``rank``), and the per-model calibration: measured (``calibrate``), fitted (``fit``) and kept beside the model
(``store``)."""
