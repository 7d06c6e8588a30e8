"""Utility of a release and independent audits: information-loss metrics of a partition
(:mod:`.metrics`), loss measures of generalised releases (:mod:`.loss`: Prec, DM, C_AVG,
non-uniform entropy, generalised IL) and validators of partitions and released tables
(:mod:`.validate`)."""
