"""Privacy models a release must satisfy, applied by every method (microaggregation and
generalisation alike): k-anonymity, distinct l-diversity (= p-sensitivity), entropy and
recursive (c, l)-diversity, t-closeness. :class:`PrivacyModels` states them; :class:`ModelCheck`
decides them for the classes of one data set. ``repair`` (the coarsening of a partition until
every class satisfies the models) shares its module's name, so it is exported from
:mod:`locpriv.tabular` (``locpriv.tabular.repair``), not here."""

from __future__ import annotations

from locpriv.tabular.models.spec import ModelCheck, PrivacyModels

__all__ = ["ModelCheck", "PrivacyModels"]
