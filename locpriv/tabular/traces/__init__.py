"""The seeds' algorithms transcribed line by line, slow and explicit, kept apart from the library:
tests check that the fast kernels give the same partitions (:mod:`.enhanced_pk`: Truta, Campan &
Meyer 2007; :mod:`.seeded`: Solanas, Sebé & Domingo-Ferrer 2008)."""
