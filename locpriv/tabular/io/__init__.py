"""Fronts of the batch core: files (:mod:`.files`), key encoding (:mod:`.encoding`), the pandas
front (:mod:`.frame`), the estimator (:mod:`.estimators`), the commands ``locpriv anonymize``
(:mod:`.cli`) and ``locpriv assess`` (:mod:`.assess_cli`) and its HTML page
(:mod:`.report_html`)."""
