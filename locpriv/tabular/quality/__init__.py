"""Utility of a release and independent audits: information-loss metrics of a partition
(:mod:`.metrics`) and validators of partitions and released tables (:mod:`.validate`)."""
