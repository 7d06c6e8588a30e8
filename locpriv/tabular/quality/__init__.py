"""Utility of a release: loss measures of generalised releases (:mod:`.loss`), and (after the
move of issue 25) the microaggregation metrics and validators."""
