"""Disclosure risk of a release: class-based measures (:mod:`.measures`), record linkage
(:mod:`.linkage`), several releases of the same records (:mod:`.history`), and the assessment
that gathers them (:mod:`.assess`)."""
